import copy
from functools import wraps

import torch
import torch.nn.functional as F
from torch import nn


def singleton(cache_key):
    def inner(fn):
        @wraps(fn)
        def wrapper(self, *args, **kwargs):
            instance = getattr(self, cache_key)
            if instance is not None:
                return instance
            instance = fn(self, *args, **kwargs)
            setattr(self, cache_key, instance)
            return instance
        return wrapper
    return inner


def mlp(dim, projection_size, hidden_size=64):
    return nn.Sequential(nn.Linear(dim, hidden_size), nn.BatchNorm1d(hidden_size), nn.ReLU(inplace=True),
                         nn.Linear(hidden_size, projection_size))


class NetWrapper(nn.Module):
    def __init__(self, net, projection_size, layer):
        super().__init__()
        self.net = net
        self.layer = layer
        self.projection_size = projection_size
        self.projector = None
        self.hidden = {}
        self.hook_registered = False

    def _hook(self, module, inputs, output):
        self.hidden[inputs[0].device] = output.flatten(1)

    def _register_hook(self):
        dict(self.net.named_modules())[self.layer].register_forward_hook(self._hook)
        self.hook_registered = True

    @singleton("projector")
    def _get_projector(self, hidden):
        return mlp(hidden.shape[1], self.projection_size).to(hidden)

    def get_representation(self, x):
        if not self.hook_registered:
            self._register_hook()
        self.hidden.clear()
        self.net(x)
        hidden = self.hidden[x.device]
        self.hidden.clear()
        return hidden

    def forward(self, x):
        representation = self.get_representation(x)
        return self._get_projector(representation)(representation), representation


class BYOL(nn.Module):
    def __init__(self, net, image_size, hidden_layer, projection_size=32, moving_average_decay=0.99):
        super().__init__()
        self.online_encoder = NetWrapper(net, projection_size, layer=hidden_layer)
        self.online_predictor = mlp(projection_size, projection_size)
        self.target_encoder = None
        self.decay = moving_average_decay
        self.forward(torch.randn(2, 3, image_size, image_size))

    @singleton("target_encoder")
    def _get_target_encoder(self):
        target_encoder = copy.deepcopy(self.online_encoder)
        for p in target_encoder.parameters():
            p.requires_grad = False
        return target_encoder

    @torch.no_grad()
    def update_moving_average(self):
        for t, o in zip(self.target_encoder.parameters(), self.online_encoder.parameters()):
            t.mul_(self.decay).add_(o.detach(), alpha=1 - self.decay)

    def forward(self, x):
        view_one = x + 0.05 * torch.randn_like(x)
        view_two = torch.flip(x, dims=[3])
        online_proj, _ = self.online_encoder(torch.cat([view_one, view_two]))
        online_pred = self.online_predictor(online_proj)
        with torch.no_grad():
            target_proj, _ = self._get_target_encoder()(torch.cat([view_one, view_two]))
        p1, p2 = online_pred.chunk(2)
        t1, t2 = target_proj.detach().chunk(2)
        loss = 2 - 2 * F.cosine_similarity(p1, t2, dim=-1) + 2 - 2 * F.cosine_similarity(p2, t1, dim=-1)
        return loss.mean()
