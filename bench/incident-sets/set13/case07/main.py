import torch

from ema import ModelEmaV2
from fastervit import FasterViTTiny


def main():
    model = FasterViTTiny(num_classes=10)
    images = torch.randn(2, 3, 16, 16)
    logits = model(images)
    print("smoke test", tuple(logits.shape))
    ema = ModelEmaV2(model, decay=0.999)
    ema.update(model)
    print("ema ready")


if __name__ == "__main__":
    main()
