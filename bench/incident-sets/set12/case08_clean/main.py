import copy

import torch

from decoder import GRUDecoder

torch.manual_seed(0)
dec = GRUDecoder()
out = dec(torch.randn(2, 4, 6))
out.sum().backward()
twin = copy.deepcopy(dec)
print("steps kept:", len(twin.step_outputs))
