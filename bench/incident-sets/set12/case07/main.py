import torch

from engine import Engine
from snapshots import snapshot

torch.manual_seed(0)
engine = Engine(torch.nn.Linear(3, 2))
history = []
for epoch in range(2):
    for _ in range(3):
        loss = engine.step(torch.randn(5, 3), torch.randn(5, 2))
    engine.end_epoch()
    snapshot(engine, history)
print("snapshots:", len(history), round(loss, 4))
