import torch
from torch import nn

from checkpointing import BestStateKeeper
from schedulers import LossRatioLR


def main():
    torch.manual_seed(0)
    x = torch.randn(64, 5)
    y = (x.sum(-1, keepdim=True) > 0).float()
    model = nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Linear(16, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    scheduler = LossRatioLR(optimizer)
    keeper = BestStateKeeper()
    for epoch in range(4):
        loss = nn.functional.binary_cross_entropy_with_logits(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step(loss)
        keeper.observe(loss.item(), model, optimizer)
        print("epoch", epoch, "lr", [round(v, 4) for v in scheduler.get_last_lr()])


if __name__ == "__main__":
    main()
