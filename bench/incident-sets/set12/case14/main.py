import torch
import torch.multiprocessing as mp

from actors import run_actor
from learner import learn


def main():
    torch.manual_seed(0)
    ctx = mp.get_context("spawn")
    queue, results = ctx.SimpleQueue(), ctx.SimpleQueue()
    learner = ctx.Process(target=learn, args=(queue, results), daemon=True)
    learner.start()
    policy = torch.nn.Sequential(torch.nn.Linear(4, 2), torch.nn.Softmax(dim=-1))
    run_actor(policy, queue, steps=3)
    print("learner saw:", results.get())
    learner.join()


if __name__ == "__main__":
    main()
