import copy

import torch

from features import FeatureExtractor

torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.ReLU(), torch.nn.Linear(6, 2))
extractor = FeatureExtractor(net, {"0", "2"})
feats = extractor(torch.randn(3, 4))
loss = sum(f.pow(2).mean() for f in feats.values())
loss.backward()
extractor.features = {k: v.detach() for k, v in extractor.features.items()}
backup = copy.deepcopy(extractor)
print("layers:", sorted(backup.features))
