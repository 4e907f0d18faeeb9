import torch
import torch.nn.functional as F
from torch import nn


class ExpertConv(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(c, c, 3, 1, 1, bias=False), nn.BatchNorm2d(c), nn.SiLU())

    def forward(self, x):
        return self.body(x)


class RouterExpertMoE(nn.Module):
    def __init__(self, c, num_experts=4, top_k=2, balance_weight=0.01):
        super().__init__()
        self.top_k = top_k
        self.balance_weight = balance_weight
        self.gate = nn.Linear(c, num_experts)
        self.experts = nn.ModuleList(ExpertConv(c) for _ in range(num_experts))
        self.aux_loss = torch.zeros(())

    def forward(self, x):
        logits = self.gate(x.mean(dim=(2, 3)))
        probs = logits.softmax(dim=-1)
        weights, idx = probs.topk(self.top_k, dim=-1)
        weights = weights / weights.sum(-1, keepdim=True)
        out = torch.zeros_like(x)
        for slot in range(self.top_k):
            for e, expert in enumerate(self.experts):
                mask = (idx[:, slot] == e).float().view(-1, 1, 1, 1)
                if mask.any():
                    out = out + mask * weights[:, slot].view(-1, 1, 1, 1) * expert(x)
        load = F.one_hot(idx[:, 0], probs.shape[-1]).float().mean(0)
        self.aux_loss = self.balance_weight * probs.shape[-1] * (load * probs.mean(0)).sum()
        return x + out


def collect_moe_loss(model):
    return sum(m.aux_loss for m in model.modules() if isinstance(m, RouterExpertMoE))
