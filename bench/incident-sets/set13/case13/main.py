import torch
from torch import nn

from training.loop import run_epoch
from training.snapshots import SnapshotKeeper
from training.state import RunState


def main():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 3))
    loader = [(torch.randn(8, 10), torch.randint(0, 3, (8,))) for _ in range(4)]
    state = RunState(model, torch.optim.SGD(model.parameters(), lr=0.1), loader)
    keeper = SnapshotKeeper()
    for _ in range(3):
        mean = run_epoch(state)
        snap = keeper.capture(state)
        print("epoch", snap.epoch, "mean loss", round(mean, 4))


if __name__ == "__main__":
    main()
