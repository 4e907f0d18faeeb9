from copy import deepcopy

import torch
from torch import nn


class ModelEmaV2(nn.Module):
    def __init__(self, model, decay=0.9999, device=None):
        super().__init__()
        self.module = deepcopy(model)
        self.module.eval()
        self.decay = decay
        self.device = device
        if device is not None:
            self.module.to(device=device)

    @torch.no_grad()
    def _update(self, model, update_fn):
        for ema_v, model_v in zip(self.module.state_dict().values(), model.state_dict().values()):
            ema_v.copy_(update_fn(ema_v, model_v))

    def update(self, model):
        self._update(model, lambda e, m: self.decay * e + (1.0 - self.decay) * m)
