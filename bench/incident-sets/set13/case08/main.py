import torch

from backbone import small_resnet
from byol import BYOL


def main():
    torch.manual_seed(0)
    encoder = small_resnet()
    learner = BYOL(encoder, image_size=32, hidden_layer="7")
    opt = torch.optim.Adam(learner.parameters(), lr=3e-4)
    for _ in range(3):
        loss = learner(torch.randn(4, 3, 32, 32))
        opt.zero_grad()
        loss.backward()
        opt.step()
        learner.update_moving_average()
    print("loss", round(loss.item(), 4))


if __name__ == "__main__":
    main()
