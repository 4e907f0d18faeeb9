import copy

import torch


class EMA:
    def __init__(self, model, decay=0.9):
        self.shadow = copy.deepcopy(model)
        self.decay = decay

    @torch.no_grad()
    def update(self, model):
        for s, p in zip(self.shadow.parameters(), model.parameters()):
            s.mul_(self.decay).add_(p, alpha=1 - self.decay)
