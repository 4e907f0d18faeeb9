import torch
from torch.utils.data import TensorDataset


def pseudo_label(teacher, unlabeled):
    with torch.no_grad():
        soft = torch.softmax(teacher(unlabeled), dim=-1)
    return TensorDataset(unlabeled, soft)
