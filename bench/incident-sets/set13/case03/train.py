import math
from copy import deepcopy

import torch

from models.moe import collect_moe_loss


class EMA:
    def __init__(self, model, decay=0.9998):
        self.shadow = deepcopy(model).eval()
        self.decay = decay
        self.steps = 0
        for p in self.shadow.parameters():
            p.requires_grad_(False)

    @torch.no_grad()
    def step(self, model):
        self.steps += 1
        d = self.decay * (1 - math.exp(-self.steps / 100))
        for s, m in zip(self.shadow.state_dict().values(), model.state_dict().values()):
            if s.dtype.is_floating_point:
                s.mul_(d).add_(m.detach(), alpha=1 - d)


class Trainer:
    def __init__(self, model, lr=1e-2):
        self.model = model
        self.lr = lr

    def setup(self):
        self.optim = torch.optim.AdamW(self.model.parameters(), lr=self.lr)
        self.ema = EMA(self.model)

    def fit(self, loader):
        self.setup()
        self.model.train()
        for images, target in loader:
            pred = self.model(images)
            loss = (pred - target).abs().mean() + collect_moe_loss(self.model)
            self.optim.zero_grad()
            loss.backward()
            self.optim.step()
            self.ema.step(self.model)
        return float(loss)
