import torch

from networks import BiddingModel
from ppo import PPOAgent


def main():
    torch.manual_seed(0)
    agent = PPOAgent(BiddingModel(private_size=4, public_size=3))
    for episode in range(3):
        private = torch.randn(16, 4)
        public = torch.randn(16, 5, 3)
        actions, _, _ = agent.act(private, public)
        returns = actions.detach() * torch.randn(16, 1)
        loss = agent.update(private, public, actions.detach(), returns)
        print("episode", episode, "loss", round(loss, 4))


if __name__ == "__main__":
    main()
