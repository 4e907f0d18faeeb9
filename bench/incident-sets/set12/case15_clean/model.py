import torch
from torch import nn


class Scorer(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(3, 3)
        self.score = nn.Linear(3, 1)
        self.feature_cache = None

    def forward(self, x):
        self.feature_cache = torch.tanh(self.body(x))
        return self.score(self.feature_cache)
