import math

import torch
from torch import nn


class RBFKernel(nn.Module):
    def __init__(self):
        super().__init__()
        self.raw_lengthscale = nn.Parameter(torch.zeros(()))
        self.raw_outputscale = nn.Parameter(torch.zeros(()))

    def forward(self, a, b):
        ls = nn.functional.softplus(self.raw_lengthscale) + 1e-4
        scale = nn.functional.softplus(self.raw_outputscale)
        return scale * torch.exp(-0.5 * torch.cdist(a / ls, b / ls).pow(2))


class PredictionStrategy:
    def __init__(self, train_x, train_y, kernel, noise):
        self.train_x = train_x
        k_train = kernel(train_x, train_x) + noise * torch.eye(len(train_x))
        self.chol = torch.linalg.cholesky(k_train)
        self.mean_cache = torch.cholesky_solve(train_y.unsqueeze(-1), self.chol).squeeze(-1)

    def __deepcopy__(self, memo):
        return None

    def predict(self, kernel, test_x):
        k_star = kernel(test_x, self.train_x)
        mean = k_star @ self.mean_cache
        v = torch.cholesky_solve(k_star.T, self.chol)
        var = kernel(test_x, test_x).diagonal() - (k_star * v.T).sum(-1)
        return mean, var.clamp_min(1e-9)


class ExactGP(nn.Module):
    def __init__(self, train_x, train_y):
        super().__init__()
        self.train_x = train_x
        self.train_y = train_y
        self.kernel = RBFKernel()
        self.raw_noise = nn.Parameter(torch.tensor(-2.0))
        self.prediction_strategy = None

    @property
    def noise(self):
        return nn.functional.softplus(self.raw_noise) + 1e-4

    def train(self, mode=True):
        self.prediction_strategy = None
        return super().train(mode)

    def marginal_log_likelihood(self):
        k = self.kernel(self.train_x, self.train_x) + self.noise * torch.eye(len(self.train_x))
        chol = torch.linalg.cholesky(k)
        alpha = torch.cholesky_solve(self.train_y.unsqueeze(-1), chol).squeeze(-1)
        n = len(self.train_y)
        return -0.5 * self.train_y @ alpha - chol.diagonal().log().sum() - 0.5 * n * math.log(2 * math.pi)

    def forward(self, test_x):
        if self.prediction_strategy is None:
            self.prediction_strategy = PredictionStrategy(self.train_x, self.train_y, self.kernel, self.noise)
        return self.prediction_strategy.predict(self.kernel, test_x)
