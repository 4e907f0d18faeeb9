import warnings

import torch

from archs.tcn import TCN
from trainer.trainer import Trainer

warnings.simplefilter("ignore", FutureWarning)
torch.manual_seed(0)
model = TCN()
trainer = Trainer(model, lr=1e-3, epochs=2)
print(trainer.describe(), model(torch.randn(2, 3, 10)).shape)
