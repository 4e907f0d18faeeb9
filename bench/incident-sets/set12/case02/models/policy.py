import torch
from torch import nn


class AttentionPolicy(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.encoder = nn.Linear(2, dim)
        self.decoder = nn.Linear(dim, 1)

    def forward(self, locs):
        self.node_embeds = self.encoder(locs)  # BREAKS
        logits = self.decoder(torch.relu(self.node_embeds)).squeeze(-1)
        return torch.log_softmax(logits, dim=-1)
