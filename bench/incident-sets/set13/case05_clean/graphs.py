import torch
from torch.utils.data import Dataset


class RandomMoleculeDataset(Dataset):
    def __init__(self, size=64, num_atoms=10, vocab=128, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.atom_types = torch.randint(0, vocab, (size, num_atoms), generator=g)
        self.edges = torch.randint(0, num_atoms, (size, 2, 20), generator=g)
        self.labels = torch.rand(size, generator=g)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, idx):
        atoms = self.atom_types[idx]
        adj = torch.zeros(atoms.shape[0], atoms.shape[0])
        adj[self.edges[idx, 0], self.edges[idx, 1]] = 1.0
        return atoms, adj, self.labels[idx]
