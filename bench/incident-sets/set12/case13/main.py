import torch
from torch.utils.data import DataLoader

from labels import pseudo_label


def main():
    torch.manual_seed(0)
    teacher = torch.nn.Linear(5, 3)
    student = torch.nn.Linear(5, 3)
    opt = torch.optim.SGD(student.parameters(), lr=0.1)
    data = pseudo_label(teacher, torch.randn(16, 5))
    loader = DataLoader(data, batch_size=4, num_workers=2, multiprocessing_context="spawn")
    for x, target in loader:
        loss = torch.nn.functional.kl_div(torch.log_softmax(student(x), -1), target, reduction="batchmean")
        opt.zero_grad()
        loss.backward()
        opt.step()
    print("distilled:", round(loss.item(), 4))


if __name__ == "__main__":
    main()
