import copy


class Trainer:
    """Keeps a snapshot of every hyperparameter it was built with, the model included."""

    def __init__(self, model, **hparams):
        self.model = model
        self.hparams = copy.deepcopy({"model": model, **hparams})

    def describe(self):
        return sorted(self.hparams)
