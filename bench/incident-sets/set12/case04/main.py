import torch
from torch.utils.data import DataLoader

from rays import RayDataset


def main():
    torch.manual_seed(0)
    poses = torch.eye(4).repeat(3, 1, 1)
    correction = torch.nn.Parameter(torch.eye(4) + 0.01 * torch.randn(4, 4))
    data = RayDataset(poses, correction)
    loader = DataLoader(data, batch_size=4, num_workers=1, multiprocessing_context="spawn")
    total = 0
    for origins, dirs in loader:
        total += origins.shape[0]
    print("rays:", total)


if __name__ == "__main__":
    main()
