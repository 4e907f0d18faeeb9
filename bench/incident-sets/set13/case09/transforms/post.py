import copy

import torch


class Compose:
    def __init__(self, transforms):
        self.transforms = list(transforms)

    def __call__(self, data):
        for t in self.transforms:
            data = t(data)
        return data


class CopyItemsd:
    def __init__(self, keys, times=1, names=None):
        self.keys = [keys] if isinstance(keys, str) else list(keys)
        self.times = times
        self.names = names or [f"{k}_{i}" for k in self.keys for i in range(times)]

    def __call__(self, data):
        d = dict(data)
        names = iter(self.names)
        for key in self.keys:
            for _ in range(self.times):
                d[next(names)] = copy.deepcopy(d[key])  # BREAKS
        return d


class Activationsd:
    def __init__(self, keys, softmax=True):
        self.keys = [keys] if isinstance(keys, str) else list(keys)
        self.softmax = softmax

    def __call__(self, data):
        d = dict(data)
        for key in self.keys:
            d[key] = torch.softmax(d[key], dim=1) if self.softmax else torch.sigmoid(d[key])
        return d


class AsDiscreted:
    def __init__(self, keys):
        self.keys = [keys] if isinstance(keys, str) else list(keys)

    def __call__(self, data):
        d = dict(data)
        for key in self.keys:
            d[key] = d[key].argmax(dim=1, keepdim=True)
        return d
