import torch

from baselines import RolloutBaseline
from models.policy import AttentionPolicy


def sanity_check(policy, batch):
    # the training framework runs a few batches before fitting starts
    with torch.no_grad():
        return policy(batch).exp().sum(-1).mean()


torch.manual_seed(0)
policy = AttentionPolicy()
batch = torch.rand(4, 10, 2)
print("sanity:", float(sanity_check(policy, batch)))
baseline = RolloutBaseline(policy)
print("baseline:", baseline.eval(batch).shape)
