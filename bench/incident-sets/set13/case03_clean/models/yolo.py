import torch
from torch import nn

from .moe import RouterExpertMoE


class MasterDetector(nn.Module):
    def __init__(self, nc=10, width=16, imgsz=64):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, 2, 1), nn.SiLU())
        self.down = nn.Sequential(nn.Conv2d(width, width * 2, 3, 2, 1), nn.SiLU())
        self.moe = RouterExpertMoE(width * 2)
        self.head = nn.Conv2d(width * 2, nc + 4, 1)
        self.stride = self._probe_stride(imgsz)

    def _probe_stride(self, imgsz):
        with torch.no_grad():
            y = self.forward(torch.zeros(2, 3, imgsz, imgsz))
        return imgsz // y.shape[-1]

    def forward(self, x):
        return self.head(self.moe(self.down(self.stem(x))))
