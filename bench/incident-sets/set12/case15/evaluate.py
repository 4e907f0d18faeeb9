import torch


def evaluate(model, results):
    with torch.no_grad():
        results.put(float(model(torch.ones(2, 3)).mean()))
