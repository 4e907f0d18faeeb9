import torch

from launcher import launch
from vits.generator import Generator

CONFIG = {"seed": 1234, "lr": 2e-4, "steps": 2}


def main():
    torch.manual_seed(0)
    generator = Generator()
    launch(generator, CONFIG, nprocs=1)
    print("training finished")


if __name__ == "__main__":
    main()
