import copy

import torch

from callbacks import LossLogger
from trainer import MiniTrainer


class Forecaster:
    """Wraps a network and the trainer settings, like a forecasting library's model object."""

    def __init__(self, callbacks):
        self.net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
        self.trainer = MiniTrainer(self.net, callbacks)

    def fit(self, xs, ys):
        self.trainer.fit(xs, ys)
        return self

    def untrained_clone(self):
        return copy.deepcopy(self)


torch.manual_seed(0)
logger = LossLogger()
model = Forecaster([logger]).fit(torch.randn(16, 4), torch.randn(16, 1))
other = model.untrained_clone()
print("steps logged:", len(logger.train_loss))
