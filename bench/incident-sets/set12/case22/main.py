import torch
import torch.multiprocessing as mp

from scoring import embed_all, nearest


def main():
    torch.manual_seed(0)
    encoder = torch.nn.Linear(4, 3)
    bank = embed_all(encoder, [torch.randn(4) for _ in range(5)])
    queries = [torch.randn(3) for _ in range(2)]
    with mp.get_context("spawn").Pool(1) as pool:
        found = pool.starmap(nearest, [(q, bank) for q in queries])
    print("nearest:", found)


if __name__ == "__main__":
    main()
