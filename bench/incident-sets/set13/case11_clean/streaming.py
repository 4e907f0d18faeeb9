import torch
from torch import nn


class FrameEncoder(nn.Module):
    def __init__(self, dim=32):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(64, dim), nn.GELU(), nn.Linear(dim, 8))

    def forward(self, frame):
        return self.net(frame)


def backward_worker(stream, n_items):
    torch.manual_seed(1)
    model = FrameEncoder()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    total = 0.0
    for _ in range(n_items):
        step, frame = stream.get()
        loss = model(frame).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        total += float(loss)
    print(f"learner trained on {n_items} frames, mean loss {total / n_items:.4f}", flush=True)
