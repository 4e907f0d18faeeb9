class RunState:
    def __init__(self, model, optimizer, loader):
        self.model = model
        self.optimizer = optimizer
        self.loader = loader
        self.epoch = 0
        self.history = []
        self.best_epoch = None

    def __getstate__(self):
        state = self.__dict__.copy()
        state["optimizer"] = None
        state["loader"] = None
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
