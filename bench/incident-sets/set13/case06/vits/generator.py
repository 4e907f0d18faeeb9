import torch
from torch import nn
from torch.nn.utils import weight_norm


class ResBlock(nn.Module):
    def __init__(self, channels, kernel_size=3, dilations=(1, 3)):
        super().__init__()
        self.convs = nn.ModuleList(
            weight_norm(nn.Conv1d(channels, channels, kernel_size, dilation=d, padding=d * (kernel_size - 1) // 2))
            for d in dilations
        )

    def forward(self, x):
        for conv in self.convs:
            x = x + conv(torch.nn.functional.leaky_relu(x, 0.1))
        return x


class Generator(nn.Module):
    def __init__(self, in_channels=16, hidden=32, upsample_rates=(4, 4)):
        super().__init__()
        self.pre = nn.Conv1d(in_channels, hidden, 7, padding=3)
        ups, blocks, ch = [], [], hidden
        for r in upsample_rates:
            ups.append(weight_norm(nn.ConvTranspose1d(ch, ch // 2, 2 * r, r, padding=r // 2)))
            ch //= 2
            blocks.append(ResBlock(ch))
        self.ups = nn.ModuleList(ups)
        self.blocks = nn.ModuleList(blocks)
        self.post = nn.Conv1d(ch, 1, 7, padding=3)

    def forward(self, z):
        x = self.pre(z)
        for up, block in zip(self.ups, self.blocks):
            x = block(up(torch.nn.functional.leaky_relu(x, 0.1)))
        return torch.tanh(self.post(x))
