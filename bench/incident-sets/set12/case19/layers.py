import torch
from torch import nn


class SparseGate(nn.Module):
    """A gate whose L1 penalty the training step adds to its loss."""

    def __init__(self, dim):
        super().__init__()
        self.logits = nn.Parameter(torch.zeros(dim))
        self.penalty = torch.tensor(0.0)

    def forward(self, x):
        gate = torch.sigmoid(self.logits)
        self.penalty = gate.abs().sum()  # BREAKS
        return x * gate
