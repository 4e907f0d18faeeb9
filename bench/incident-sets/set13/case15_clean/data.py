import torch
from torch.utils.data import Dataset


class PseudoFeatureDataset(Dataset):
    def __init__(self, clips, labels, encoder, mean, std):
        self.clips = clips
        self.labels = labels
        self.encoder = encoder
        self.mean = mean
        self.std = std

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, idx):
        with torch.no_grad():
            feat = self.encoder(self.clips[idx].unsqueeze(0)).squeeze(0)
        return (feat - self.mean) / self.std, self.labels[idx]


def feature_stats(encoder, clips):
    feats = encoder(clips)
    return feats.mean(0).detach(), feats.std(0).detach() + 1e-5
