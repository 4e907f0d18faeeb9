import torch


class SupervisedTrainer:
    def __init__(self, network, optimizer, loss_function, postprocessing=None):
        self.network = network
        self.optimizer = optimizer
        self.loss_function = loss_function
        self.postprocessing = postprocessing
        self.history = []

    def _iteration(self, batch):
        images, labels = batch["image"], batch["label"]
        self.network.train()
        pred = self.network(images)
        loss = self.loss_function(pred, labels)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        output = {"image": images, "label": labels, "pred": pred, "loss": loss.item()}
        if self.postprocessing is not None:
            output = self.postprocessing(output)
        return output

    def run(self, loader):
        for batch in loader:
            out = self._iteration(batch)
            acc = (out["pred_discrete"].squeeze(1) == out["label"]).float().mean().item()
            self.history.append((out["loss"], acc))
        return self.history
