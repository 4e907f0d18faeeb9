import torch
from torch import nn


class TinyDecoder(nn.Module):
    def __init__(self, vocab=20, dim=8, layers=2):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.k = nn.ModuleList(nn.Linear(dim, dim) for _ in range(layers))
        self.v = nn.ModuleList(nn.Linear(dim, dim) for _ in range(layers))
        self.head = nn.Linear(dim, vocab)

    def forward(self, ids, cache):
        h = self.embed(ids)
        for i, (k_proj, v_proj) in enumerate(zip(self.k, self.v)):
            k, v = cache.update(i, k_proj(h), v_proj(h))
            att = torch.softmax(h @ k.transpose(-1, -2), dim=-1)
            h = h + att @ v
        return self.head(h), cache
