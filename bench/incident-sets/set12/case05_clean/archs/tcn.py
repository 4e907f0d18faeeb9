from torch import nn
from torch.nn.utils.parametrizations import weight_norm


class TemporalBlock(nn.Module):
    def __init__(self, c_in, c_out, k=3):
        super().__init__()
        self.conv = weight_norm(nn.Conv1d(c_in, c_out, k, padding=k - 1))
        self.act = nn.ReLU()

    def forward(self, x):
        return self.act(self.conv(x))[..., : x.shape[-1]]


class TCN(nn.Module):
    def __init__(self, c_in=3, hidden=8):
        super().__init__()
        self.blocks = nn.Sequential(TemporalBlock(c_in, hidden), TemporalBlock(hidden, hidden))
        self.out = nn.Conv1d(hidden, 1, 1)

    def forward(self, x):
        return self.out(self.blocks(x))
