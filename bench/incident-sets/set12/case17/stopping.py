class EarlyStopping:
    def __init__(self, patience=2):
        self.patience = patience
        self.best = None
        self.bad_epochs = 0

    def update(self, val_loss):
        if self.best is None or val_loss < self.best:
            self.best = val_loss  # BREAKS
            self.bad_epochs = 0
        else:
            self.bad_epochs += 1
        return self.bad_epochs >= self.patience
