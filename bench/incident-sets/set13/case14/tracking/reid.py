import torch
from torch import nn

from .detection import Detection


class ReIDHead(nn.Module):
    def __init__(self, in_dim=24, dim=16):
        super().__init__()
        self.proj = nn.Sequential(nn.Linear(in_dim, dim), nn.ReLU(), nn.Linear(dim, dim))

    def forward(self, crops):
        return nn.functional.normalize(self.proj(crops), dim=-1)


def build_detections(reid, boxes, scores, crops):
    embeddings = reid(crops)
    return [Detection(b, s, e) for b, s, e in zip(boxes, scores, embeddings)]  # BREAKS
