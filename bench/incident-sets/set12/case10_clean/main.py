import copy

import torch

from posterior import Posterior

torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(2, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))
post = Posterior(net, torch.randn(5, 2))
frozen = copy.deepcopy(post)
print("mean:", frozen.mean.shape)
print("samples:", frozen.sample(3).shape)
