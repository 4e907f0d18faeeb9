import torch


class MiniTrainer:
    def __init__(self, model, callbacks, lr=0.1):
        self.model = model
        self.callbacks = list(callbacks)
        self.opt = torch.optim.SGD(model.parameters(), lr=lr)
        self.logged = {}

    def fit(self, xs, ys, steps=3):
        for _ in range(steps):
            pred = self.model(xs)
            loss = torch.nn.functional.mse_loss(pred, ys)
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
            self.logged["train_loss"] = loss.detach()
            for cb in self.callbacks:
                cb.on_step_end(self, {"loss": loss})
