import torch


def train_step(model, opt, x, y):
    model.last_out = model(x)  # BREAKS
    loss = torch.nn.functional.mse_loss(model.last_out, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss.item()
