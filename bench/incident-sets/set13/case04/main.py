import torch

from minilit.callbacks import StochasticWeightAveraging
from minilit.trainer import Trainer
from regressor import LitRegressor


def main():
    torch.manual_seed(0)
    x = torch.randn(64, 6)
    y = x @ torch.randn(6) + 0.1 * torch.randn(64)
    batches = [(x[i:i + 16], y[i:i + 16]) for i in range(0, 64, 16)]
    model = LitRegressor(6)
    trainer = Trainer(max_epochs=3, auto_lr_find=True,
                      callbacks=[StochasticWeightAveraging(swa_lr=1e-2)])
    trainer.fit(model, batches)
    print("epoch losses", [round(v, 3) for v in model.epoch_losses])


if __name__ == "__main__":
    main()
