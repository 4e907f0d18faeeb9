import torch

from ema import EMA
from layers import SparseGate

torch.manual_seed(0)
gate = SparseGate(4)
head = torch.nn.Linear(4, 1)
model = torch.nn.Sequential(gate, head)
opt = torch.optim.SGD(model.parameters(), lr=0.5)
ema = None
for step in range(3):
    x = torch.randn(8, 4)
    loss = model(x).pow(2).mean() + 0.1 * gate.penalty
    opt.zero_grad()
    loss.backward()
    assert gate.logits.grad.abs().sum() > 0, "the penalty must keep training the gate"
    opt.step()
    if ema is None:
        ema = EMA(model)
    ema.update(model)
print("gate:", [round(v, 4) for v in torch.sigmoid(gate.logits).tolist()])
