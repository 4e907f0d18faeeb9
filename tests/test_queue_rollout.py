"""A rollout sent over a multiprocessing queue, as users run it and with torch: the actor keeps
``(obs, action, log_prob)`` for each step and puts each on a ``SimpleQueue`` of a context made
with ``mp.get_context("spawn")``.  The sampled action is a fresh tensor and the observation is
data; the log-prob is on the graph, so the put raises "Cowardly refusing to serialize non-leaf
tensor".  The twin detaches the log-prob and runs; neither the action nor the observation is
reported (a tuple returned by a call keeps what each of its items holds)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

ACTOR = '''\
import torch


def rollout(policy, steps=3):
    transitions = []
    obs = torch.zeros(4)
    for t in range(steps):
        action, log_prob = policy.act(obs)
        transitions.append((obs, action, {log_prob}))
        obs = torch.randn(4)
    return transitions


def actor(policy, queue):
    for transition in rollout(policy):
        queue.put(transition)
    queue.put(None)
'''

POLICY = '''\
import torch.nn as nn
from torch.distributions import Categorical


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))

    def act(self, obs):
        dist = Categorical(logits=self.body(obs))
        action = dist.sample()
        return action, dist.log_prob(action)
'''

RUN = '''\
import torch.multiprocessing as mp

from actor import actor
from policy import Policy


def main():
    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    actor(Policy(), queue)
    print("sent")


if __name__ == "__main__":
    main()
'''


@pytest.mark.parametrize("detached", [False, True])
def test_a_rollout_put_on_a_context_queue(tmp_path, detached):
    (tmp_path / "actor.py").write_text(ACTOR.replace("{log_prob}", "log_prob.detach()" if detached else "log_prob"))
    (tmp_path / "policy.py").write_text(POLICY)
    (tmp_path / "run.py").write_text(RUN)
    r = subprocess.run([sys.executable, "-m", "flake8_graphleaf", "check", "--isolated", "--no-cache",
                        "--output-format", "concise", str(tmp_path)], capture_output=True, text=True, timeout=300,
                       cwd=ROOT)
    if detached:
        assert r.returncode == 0 and r.stdout == "", r.stdout
    else:
        assert "actor.py:16:9: GLF301 queue.put(...) will fail: it sends a tensor on the autograd graph" in r.stdout, r.stdout
        assert r.stdout.count("GLF301") == 1, r.stdout  # the None put after the loop is not one


@pytest.mark.slow  # the rollout run with torch (a spawned process): the check above, confirmed
@pytest.mark.torch
@pytest.mark.parametrize("detached", [False, True])
def test_a_rollout_put_on_a_context_queue_runs_as_judged(tmp_path, detached):
    pytest.importorskip("torch")
    (tmp_path / "actor.py").write_text(ACTOR.replace("{log_prob}", "log_prob.detach()" if detached else "log_prob"))
    (tmp_path / "policy.py").write_text(POLICY)
    (tmp_path / "run.py").write_text(RUN)
    ran = subprocess.run([sys.executable, "run.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    if detached:
        assert ran.returncode == 0 and "sent" in ran.stdout, ran.stderr
    else:
        assert ran.returncode != 0 and "Cowardly refusing to serialize non-leaf tensor" in ran.stderr, ran.stderr
