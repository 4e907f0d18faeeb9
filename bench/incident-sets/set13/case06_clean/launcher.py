import torch
import torch.multiprocessing as mp

from vits.generator import Generator


def _fit_worker(rank, weights, config):
    torch.manual_seed(config["seed"] + rank)
    generator = Generator()
    generator.load_state_dict(weights)
    opt = torch.optim.AdamW(generator.parameters(), lr=config["lr"])
    for _ in range(config["steps"]):
        z = torch.randn(2, 16, 8)
        audio = generator(z)
        loss = audio.abs().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"rank {rank}: loss {loss.item():.4f}", flush=True)


def launch(generator, config, nprocs=1):
    mp.start_processes(_fit_worker, args=(generator.state_dict(), config), nprocs=nprocs, start_method="spawn")
