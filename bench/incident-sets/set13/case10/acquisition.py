import copy

import torch


def expected_improvement(model, candidates, best_f):
    mean, var = model(candidates)
    sigma = var.sqrt()
    z = (mean - best_f) / sigma
    normal = torch.distributions.Normal(0.0, 1.0)
    return sigma * (z * normal.cdf(z) + normal.log_prob(z).exp())


def fantasize(model, new_x, new_y):
    fantasy = copy.deepcopy(model)
    fantasy.train_x = torch.cat([fantasy.train_x, new_x])
    fantasy.train_y = torch.cat([fantasy.train_y, new_y])
    fantasy.prediction_strategy = None
    return fantasy
