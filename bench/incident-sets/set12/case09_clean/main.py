import torch

from search import beam_search

torch.manual_seed(0)
cell = torch.nn.GRUCell(4, 4)
head = torch.nn.Linear(4, 5)
best = beam_search(cell, head, torch.zeros(1, 4))
print([b.tokens for b in best])
