import torch

from net import AttnClassifier
from utils.swa import start_weight_averaging

torch.manual_seed(0)
model = AttnClassifier()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(6, 5, 8), torch.randint(0, 3, (6,))
for _ in range(2):
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
swa_model = start_weight_averaging(model)
swa_model.update_parameters(model)
print("averaged:", int(swa_model.n_averaged))
