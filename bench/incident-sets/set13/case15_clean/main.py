import torch
from torch import nn
from torch.utils.data import DataLoader

from data import PseudoFeatureDataset, feature_stats
from encoders import SpectrogramEncoder


def main():
    torch.manual_seed(0)
    clips = torch.randn(32, 20, 16)
    labels = torch.randint(0, 4, (32,))
    encoder = SpectrogramEncoder()
    mean, std = feature_stats(encoder, clips[:8])
    dataset = PseudoFeatureDataset(clips, labels, encoder, mean, std)
    loader = DataLoader(dataset, batch_size=8, num_workers=2, multiprocessing_context="spawn")
    probe = nn.Linear(12, 4)
    opt = torch.optim.SGD(probe.parameters(), lr=0.1)
    for feats, y in loader:
        loss = nn.functional.cross_entropy(probe(feats), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print("probe loss", round(loss.item(), 4))


if __name__ == "__main__":
    main()
