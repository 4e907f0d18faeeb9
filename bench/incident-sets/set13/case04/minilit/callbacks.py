from copy import deepcopy

import torch


class Callback:
    def setup(self, trainer, module):
        pass

    def on_train_epoch_end(self, trainer, module):
        pass


class StochasticWeightAveraging(Callback):
    def __init__(self, swa_lr, swa_epoch_start=1):
        self.swa_lr = swa_lr
        self.swa_epoch_start = swa_epoch_start
        self._average_model = None
        self.n_averaged = 0

    def setup(self, trainer, module):
        self._average_model = deepcopy(module)

    @torch.no_grad()
    def on_train_epoch_end(self, trainer, module):
        if trainer.current_epoch < self.swa_epoch_start:
            return
        self.n_averaged += 1
        for avg, cur in zip(self._average_model.parameters(), module.parameters()):
            avg.add_((cur.detach() - avg) / self.n_averaged)
