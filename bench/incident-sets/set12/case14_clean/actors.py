import torch


def run_actor(policy, queue, steps):
    for t in range(steps):
        obs = torch.randn(1, 4)
        with torch.no_grad():
            probs = policy(obs)
        queue.put((t, obs, probs))
    queue.put(None)
