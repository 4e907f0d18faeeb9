import copy


class BestStateKeeper:
    def __init__(self):
        self.best_loss = float("inf")
        self.model_state = None
        self.optim_state = None

    def observe(self, loss, model, optimizer):
        if loss < self.best_loss:
            self.best_loss = loss
            self.model_state = copy.deepcopy(model.state_dict())
            self.optim_state = copy.deepcopy(optimizer.state_dict())
