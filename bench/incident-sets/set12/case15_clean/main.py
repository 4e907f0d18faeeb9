import torch
import torch.multiprocessing as mp

from evaluate import evaluate
from model import Scorer


def main():
    torch.manual_seed(0)
    model = Scorer()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = model(torch.randn(4, 3)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    model.feature_cache = None
    ctx = mp.get_context("spawn")
    results = ctx.SimpleQueue()
    worker = ctx.Process(target=evaluate, args=(model, results))
    worker.start()
    print("eval:", round(results.get(), 4))
    worker.join()


if __name__ == "__main__":
    main()
