import torch


def run_epoch(state):
    state.model.train()
    total, n = 0.0, 0
    for x, y in state.loader:
        logits = state.model(x)
        loss = torch.nn.functional.cross_entropy(logits, y)
        state.optimizer.zero_grad()
        loss.backward()
        state.optimizer.step()
        total, n = total + loss.item(), n + 1
    state.history.append({"epoch": state.epoch, "last_loss": loss, "mean_loss": total / n})  # BREAKS
    state.epoch += 1
    return total / n
