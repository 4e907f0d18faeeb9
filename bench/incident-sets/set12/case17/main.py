import torch

from checkpoint import make_checkpoint
from stopping import EarlyStopping


def validate(model, x, y):
    return torch.nn.functional.mse_loss(model(x), y)


torch.manual_seed(0)
model = torch.nn.Linear(3, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
stopper = EarlyStopping()
xv, yv = torch.randn(8, 3), torch.randn(8, 1)
ckpts = []
for epoch in range(3):
    loss = torch.nn.functional.mse_loss(model(torch.randn(8, 3)), torch.randn(8, 1))
    opt.zero_grad()
    loss.backward()
    opt.step()
    stop = stopper.update(validate(model, xv, yv))
    ckpts.append(make_checkpoint(model, stopper, epoch))
    if stop:
        break
print("checkpoints:", len(ckpts))
