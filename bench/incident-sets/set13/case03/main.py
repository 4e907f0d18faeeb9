import torch

from models.yolo import MasterDetector
from train import Trainer


def main():
    torch.manual_seed(3)
    model = MasterDetector(nc=10)
    print("stride", model.stride)
    loader = [(torch.randn(4, 3, 64, 64), torch.randn(4, 14, 16, 16)) for _ in range(2)]
    print("loss", round(Trainer(model).fit(loader), 3))


if __name__ == "__main__":
    main()
