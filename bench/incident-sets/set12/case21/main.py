import copy

import torch

from steps import train_step

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.ReLU(), torch.nn.Linear(3, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(2):
    loss = train_step(model, opt, torch.randn(6, 3), torch.randn(6, 1))
eval_model = copy.deepcopy(model).eval()
print("loss:", round(loss, 4))
