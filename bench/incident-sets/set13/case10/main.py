import torch

from acquisition import expected_improvement, fantasize
from gp import ExactGP


def objective(x):
    return torch.sin(3 * x).sum(-1)


def main():
    torch.manual_seed(0)
    train_x = torch.rand(8, 1)
    train_y = objective(train_x)
    model = ExactGP(train_x, train_y)
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    for _ in range(20):
        loss = -model.marginal_log_likelihood()
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    candidates = torch.linspace(0, 1, 50).unsqueeze(-1)
    ei = expected_improvement(model, candidates, train_y.max())
    x_next = candidates[ei.argmax()].unsqueeze(0)
    fantasy = fantasize(model, x_next, objective(x_next))
    fantasy.eval()
    mean, _ = fantasy(candidates)
    print("next x", round(x_next.item(), 3), "fantasy max", round(mean.max().item(), 3))


if __name__ == "__main__":
    main()
