import copy

import torch


class PPOAgent:
    def __init__(self, model, lr=3e-4, clip=0.2):
        self.model = model
        self.clip = clip
        self.optimizer = torch.optim.Adam(model.parameters(), lr=lr)
        self.old_model = copy.deepcopy(model)

    def act(self, private_input, public_seq):
        mu, sigma, value = self.model(private_input, public_seq)
        dist = torch.distributions.Normal(mu, sigma)
        action = dist.sample()
        return action, dist.log_prob(action), value

    def update(self, private_input, public_seq, actions, returns):
        with torch.no_grad():
            old_mu, old_sigma, _ = self.old_model(private_input, public_seq)
            old_logp = torch.distributions.Normal(old_mu, old_sigma).log_prob(actions)
        mu, sigma, value = self.model(private_input, public_seq)
        logp = torch.distributions.Normal(mu, sigma).log_prob(actions)
        advantage = returns - value.detach()
        ratio = (logp - old_logp).exp()
        surrogate = torch.min(ratio * advantage, ratio.clamp(1 - self.clip, 1 + self.clip) * advantage)
        loss = -surrogate.mean() + 0.5 * (returns - value).pow(2).mean()
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        self.old_model = copy.deepcopy(self.model)
        return loss.item()
