import torch
from torch import nn


class Conv(nn.Module):
    def __init__(self, c1, c2, k=1, s=1):
        super().__init__()
        self.conv = nn.Conv2d(c1, c2, k, s, k // 2, bias=False)
        self.bn = nn.BatchNorm2d(c2)
        self.act = nn.SiLU()

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))


class KernelAttentionConv(nn.Module):
    """Dynamic convolution: mixes K candidate kernels with a per-image attention."""

    def __init__(self, c1, c2, k=3, s=1, num_kernels=4):
        super().__init__()
        self.stride = s
        self.padding = k // 2
        self.weight = nn.Parameter(torch.randn(num_kernels, c2, c1, k, k) * 0.05)
        self.router = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c1, num_kernels))
        self.bn = nn.BatchNorm2d(c2)
        self.act = nn.SiLU()

    def forward(self, x):
        attn = torch.softmax(self.router(x), dim=-1)
        mixed = torch.einsum("bk,koihw->boihw", attn, self.weight).mean(0)
        y = nn.functional.conv2d(x, mixed, stride=self.stride, padding=self.padding)
        return self.act(self.bn(y))


class DetectHead(nn.Module):
    def __init__(self, c, nc):
        super().__init__()
        self.nc = nc
        self.stride = torch.zeros(1)
        self.pred = nn.Conv2d(c, nc + 4, 1)

    def forward(self, x):
        return self.pred(x)
