import math

import torch
from torch import nn


class ConvBNAct(nn.Module):
    def __init__(self, c_in, c_out, k=3, s=1):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, k, s, k // 2, bias=False)
        self.bn = nn.BatchNorm2d(c_out)
        self.act = nn.SiLU()

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))


class RotatedBoxHead(nn.Module):
    def __init__(self, channels, num_classes, reg_max=4):
        super().__init__()
        self.num_classes = num_classes
        self.reg = nn.Sequential(ConvBNAct(channels, channels), nn.Conv2d(channels, 4 * reg_max, 1))
        self.cls = nn.Sequential(ConvBNAct(channels, channels), nn.Conv2d(channels, num_classes, 1))
        self.theta = nn.Sequential(ConvBNAct(channels, channels), nn.Conv2d(channels, 1, 1))

    def forward(self, feats):
        angle = (self.theta(feats).sigmoid() - 0.25) * math.pi
        if not self.training:
            self.angle = angle
        out = torch.cat([self.reg(feats), self.cls(feats)], dim=1)
        if self.training:
            return out, angle
        return torch.cat([out, angle], dim=1)
