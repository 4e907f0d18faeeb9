class LossLogger:
    """Keeps the per-step training loss so a notebook can plot it later."""

    def __init__(self):
        self.train_loss = []

    def on_step_end(self, trainer, outputs):
        self.train_loss.append(outputs["loss"])  # BREAKS
