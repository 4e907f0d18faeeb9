import torch


class Engine:
    """Runs training steps and keeps the last step's outputs for the progress display."""

    def __init__(self, model, lr=0.05):
        self.model = model
        self.opt = torch.optim.Adam(model.parameters(), lr=lr)
        self.last_output = None
        self.last_loss = None

    def step(self, x, y):
        out = self.model(x)
        loss = torch.nn.functional.mse_loss(out, y)
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        self.last_output = out  # BREAKS
        self.last_loss = loss.item()
        return self.last_loss

    def end_epoch(self):
        pass
