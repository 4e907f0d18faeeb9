import torch

from utils.torch_utils import ModelEMA


class DetectionTrainer:
    def __init__(self, model, epochs=1, lr=0.01):
        self.model = model
        self.epochs = epochs
        self.lr = lr
        self.ema = None

    def _setup_train(self):
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=self.lr, momentum=0.9)
        self.ema = ModelEMA(self.model)

    def train(self, batches):
        self._setup_train()
        self.model.train()
        for _ in range(self.epochs):
            for images, targets in batches:
                loss = (self.model(images) - targets).pow(2).mean()
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
                self.ema.update(self.model)
        return loss.item()
