class LossRatioLR:
    def __init__(self, optimizer, floor=0.1):
        self.optimizer = optimizer
        self.floor = floor
        self.base_lrs = [g["lr"] for g in optimizer.param_groups]
        self.reference = None

    def step(self, loss):
        if self.reference is None:
            self.reference = float(loss)
        ratio = (loss / self.reference).clamp(min=self.floor, max=1.0)
        for group, base in zip(self.optimizer.param_groups, self.base_lrs):
            group["lr"] = base * ratio  # BREAKS

    def get_last_lr(self):
        return [float(g["lr"]) for g in self.optimizer.param_groups]
