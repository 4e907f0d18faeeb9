import copy

import torch


class RolloutBaseline:
    """Greedy-rollout baseline: a frozen copy of the policy, refreshed each epoch."""

    def __init__(self, policy, device="cpu"):
        self.policy = copy.deepcopy(policy).to(device)
        self.policy.eval()

    def eval(self, locs):
        with torch.no_grad():
            return self.policy(locs).max(dim=-1).values
