import torch
from torch import nn

from .blocks import Conv, DetectHead, KernelAttentionConv

LAYERS = {"Conv": Conv, "KAConv": KernelAttentionConv}


class DetectionModel(nn.Module):
    def __init__(self, cfg, ch=3, nc=8):
        super().__init__()
        layers, c_in = [], ch
        for name, c_out, k, s in cfg["backbone"]:
            layers.append(LAYERS[name](c_in, c_out, k, s))
            c_in = c_out
        self.backbone = nn.Sequential(*layers)
        self.detect = DetectHead(c_in, nc)
        probe = 64
        out = self.forward(torch.zeros(1, ch, probe, probe))
        self.detect.stride = torch.tensor([probe / out.shape[-1]])
        self.stride = self.detect.stride

    def forward(self, x):
        return self.detect(self.backbone(x))
