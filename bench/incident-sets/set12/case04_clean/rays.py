import torch
from torch.utils.data import Dataset


class RayDataset(Dataset):
    """Rays of every training camera; the poses are refined by a learnable correction."""

    def __init__(self, poses, pose_correction, n_rays=8):
        self.poses = (poses @ pose_correction).detach()
        self.n_rays = n_rays

    def __len__(self):
        return self.poses.shape[0] * self.n_rays

    def __getitem__(self, i):
        cam = self.poses[i // self.n_rays]
        return cam[:3, 3], cam[:3, 2]
