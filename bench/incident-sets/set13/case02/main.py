import torch

from engine.trainer import DetectionTrainer
from nn.tasks import DetectionModel

CFG = {"backbone": [("Conv", 16, 3, 2), ("KAConv", 32, 3, 2), ("Conv", 32, 3, 1)]}


def main():
    torch.manual_seed(0)
    model = DetectionModel(CFG, nc=8)
    batches = [(torch.randn(2, 3, 64, 64), torch.randn(2, 12, 16, 16)) for _ in range(3)]
    trainer = DetectionTrainer(model)
    print("final loss", round(trainer.train(batches), 3))


if __name__ == "__main__":
    main()
