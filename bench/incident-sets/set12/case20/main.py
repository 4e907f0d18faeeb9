import copy

import torch

from snapshot import Prediction

torch.manual_seed(0)
net = torch.nn.Linear(3, 2)
x = torch.randn(4, 3)
pred = Prediction(x, net(x))  # BREAKS
archive = [copy.deepcopy(pred)]
print("archived:", len(archive))
