import torch
from torch import nn


class GRUDecoder(nn.Module):
    def __init__(self, dim=6):
        super().__init__()
        self.cell = nn.GRUCell(dim, dim)
        self.hidden = None
        self.step_outputs = []

    def forward(self, xs):
        h = torch.zeros(xs.shape[0], xs.shape[-1])
        for t in range(xs.shape[1]):
            h = self.cell(xs[:, t], h)
            self.step_outputs.append(h)  # BREAKS
        self.hidden = h.detach()
        return h

    def __getstate__(self):
        state = self.__dict__.copy()
        state["hidden"] = None  # recurrent state is not part of a copy
        return state
