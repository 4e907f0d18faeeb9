import torch
from torch.utils.data import DataLoader

from graphs import RandomMoleculeDataset
from model import DenseGCN


def main():
    torch.manual_seed(0)
    dataset = RandomMoleculeDataset()
    loader = DataLoader(dataset, batch_size=8, shuffle=True, num_workers=2)
    model = DenseGCN()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for x, adj, y in loader:
        loss = torch.nn.functional.mse_loss(model(x, adj), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print("loss", round(loss.item(), 4))


if __name__ == "__main__":
    main()
