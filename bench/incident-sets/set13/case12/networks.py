import torch
from torch import nn


class Policy(nn.Module):
    def __init__(self, state_size):
        super().__init__()
        self.fc = nn.Sequential(nn.Linear(state_size * 2, 64), nn.Tanh(), nn.Linear(64, 32), nn.Tanh())
        self.mu_head = nn.Sequential(nn.Linear(32, 1), nn.Sigmoid())
        self.sigma_head = nn.Sequential(nn.Linear(32, 1), nn.Softplus())
        self.value_head = nn.Linear(32, 1)

    def forward(self, x):
        h = self.fc(x)
        return self.mu_head(h), self.sigma_head(h) + 1e-3, self.value_head(h)


class BiddingModel(nn.Module):
    def __init__(self, private_size, public_size, state_size=8):
        super().__init__()
        self.ann_private = nn.Sequential(nn.Linear(private_size, state_size), nn.ReLU())
        self.rnn_public = nn.GRU(public_size, state_size, batch_first=True)
        self.policy = Policy(state_size)

    def forward(self, private_input, public_seq):
        private = self.ann_private(private_input)
        _, h = self.rnn_public(public_seq)
        self.inference_state = torch.cat([h[-1], private], dim=-1)  # BREAKS
        return self.policy(self.inference_state)
