import math


class Trainer:
    def __init__(self, max_epochs=2, callbacks=None, auto_lr_find=False):
        self.max_epochs = max_epochs
        self.callbacks = list(callbacks or [])
        self.auto_lr_find = auto_lr_find
        self.current_epoch = 0

    def _run_steps(self, module, optimizer, batches):
        for i, batch in enumerate(batches):
            loss = module.training_step(batch, i)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        return loss

    def lr_find(self, module, batches, min_lr=1e-5, max_lr=0.1, steps=5):
        optimizer = module.configure_optimizers()
        best = (math.inf, None)
        for k in range(steps):
            lr = min_lr * (max_lr / min_lr) ** (k / (steps - 1))
            for group in optimizer.param_groups:
                group["lr"] = lr
            loss = self._run_steps(module, optimizer, batches[:1])
            best = min(best, (float(loss), lr))
        module.lr = best[1]
        return best[1]

    def fit(self, module, batches):
        if self.auto_lr_find:
            self.lr_find(module, batches)
        for cb in self.callbacks:
            cb.setup(self, module)
        optimizer = module.configure_optimizers()
        for epoch in range(self.max_epochs):
            self.current_epoch = epoch
            self._run_steps(module, optimizer, batches)
            module.on_train_epoch_end()
            for cb in self.callbacks:
                cb.on_train_epoch_end(self, module)
