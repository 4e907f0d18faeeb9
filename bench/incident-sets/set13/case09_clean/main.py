import torch
from torch import nn

from engines.trainer import SupervisedTrainer
from transforms.post import Activationsd, AsDiscreted, Compose, CopyItemsd


def main():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 3, 1))
    post = Compose([
        Activationsd(keys="pred", softmax=True),
        CopyItemsd(keys="pred", times=1, names=["pred_discrete"]),
        AsDiscreted(keys="pred_discrete"),
    ])
    trainer = SupervisedTrainer(net, torch.optim.Adam(net.parameters(), 1e-3), nn.CrossEntropyLoss(), post)
    loader = [{"image": torch.randn(2, 1, 16, 16), "label": torch.randint(0, 3, (2, 16, 16))} for _ in range(3)]
    history = trainer.run(loader)
    print("last", [round(v, 3) for v in history[-1]])


if __name__ == "__main__":
    main()
