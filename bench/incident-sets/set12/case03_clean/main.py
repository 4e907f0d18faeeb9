import copy

import torch

from cache import PromptCache
from model import TinyDecoder

torch.manual_seed(0)
model = TinyDecoder()
prefix = torch.randint(0, 20, (1, 5))
with torch.no_grad():
    _, prompt_cache = model(prefix, PromptCache())

for prompt in ([3, 4], [7, 1, 2]):
    cache = copy.deepcopy(prompt_cache)
    print(len(cache.keys), prompt)
