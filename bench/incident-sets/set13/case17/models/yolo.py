from torch import nn


def conv(c1, c2, s=1):
    return nn.Sequential(nn.Conv2d(c1, c2, 3, s, 1, bias=False), nn.BatchNorm2d(c2), nn.SiLU())


class Model(nn.Module):
    def __init__(self, width=8, nc=5, distill_idx=(1, 2)):
        super().__init__()
        self.layers = nn.ModuleList([conv(3, width, 2), conv(width, width * 2, 2), conv(width * 2, width * 4, 2)])
        self.head = nn.Conv2d(width * 4, nc + 5, 1)
        self.distill_idx = set(distill_idx)
        self.distill_feats = []

    def forward(self, x):
        self.distill_feats = []
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i in self.distill_idx:
                self.distill_feats.append(x)  # BREAKS
        return self.head(x)
