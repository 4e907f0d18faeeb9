"""What ``pytest --graphleaf`` costs: one suite of training-step tests, run with and without the plugin.

    python bench/pytest_overhead.py                 # 3 rounds, each: the suite without, then with --graphleaf
    python bench/pytest_overhead.py --rounds 5 --steps 20 --keep /tmp/suite

The suite is written to a temporary folder: small models of the usual kinds (MLP, CNN, GRU, a
transformer encoder layer, an EMA copy each few steps, a DataLoader without workers), each test building
its model and running ``--steps`` optimizer steps, and checking the loss went down (nothing in it is
left on the graph: the plugin's finding-free path, which is what a healthy suite pays).  Each round runs
``python -m pytest -q -p no:cacheprovider SUITE`` twice in fresh processes, alternating which goes first,
and times

- the session: pytest's own duration of the run (collection and tests; the interpreter's start and
  ``import torch`` in ``conftest.py`` are outside it), read from the ``--junitxml`` report;
- the process: the whole command, as a CI job sees it;
- the CPU: the user + system CPU seconds of the whole command (``resource.getrusage`` of the children):
  what the run costs, less moved than the wall clock by other work on a busy machine.

It prints each round and the ratios of the medians (with / without).  Timing varies on a busy machine:
compare numbers of one run, not across runs.  Needs torch.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import xml.etree.ElementTree as ET

CONFTEST = '''\
import torch

torch.set_num_threads(1)
'''

TESTS = '''\
import copy

import pytest
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

STEPS = {steps}


def mlp(width):
    return nn.Sequential(nn.Linear(16, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 1))


class SmallCNN(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(1, channels, 3, padding=1), nn.BatchNorm2d(channels), nn.ReLU(),
                                  nn.MaxPool2d(2), nn.Conv2d(channels, channels, 3, padding=1), nn.ReLU())
        self.head = nn.Linear(channels * 8 * 8, 10)

    def forward(self, x):
        return self.head(self.conv(x).flatten(1))


class Tagger(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.embed = nn.Embedding(50, 16)
        self.rnn = nn.GRU(16, hidden, batch_first=True)
        self.out = nn.Linear(hidden, 5)

    def forward(self, tokens):
        h, _ = self.rnn(self.embed(tokens))
        return self.out(h)


def fit(model, batch, loss_fn, steps=STEPS, lr=1e-2):
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        loss = loss_fn(model, batch)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def regression(model, batch):
    x, y = batch
    return nn.functional.mse_loss(model(x), y)


@pytest.mark.parametrize("width", [16, 32, 64, 128])
def test_mlp_regression(width):
    torch.manual_seed(0)
    x = torch.randn(64, 16)
    losses = fit(mlp(width), (x, x.sum(1, keepdim=True)), regression)
    assert losses[-1] < losses[0]


@pytest.mark.parametrize("channels", [4, 8, 16])
def test_cnn_classification(channels):
    torch.manual_seed(0)
    x, y = torch.randn(32, 1, 16, 16), torch.randint(0, 10, (32,))
    losses = fit(SmallCNN(channels), (x, y), lambda m, b: nn.functional.cross_entropy(m(b[0]), b[1]))
    assert losses[-1] < losses[0]


@pytest.mark.parametrize("hidden", [16, 32, 64])
def test_gru_tagger(hidden):
    torch.manual_seed(0)
    tokens, tags = torch.randint(0, 50, (16, 12)), torch.randint(0, 5, (16, 12))
    losses = fit(Tagger(hidden), (tokens, tags),
                 lambda m, b: nn.functional.cross_entropy(m(b[0]).flatten(0, 1), b[1].flatten()))
    assert losses[-1] < losses[0]


@pytest.mark.parametrize("heads", [2, 4])
def test_transformer_layer(heads):
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(32, heads, dim_feedforward=64, batch_first=True, dropout=0.0)
    x = torch.randn(8, 10, 32)
    losses = fit(layer, (x, x), regression, lr=1e-3)
    assert losses[-1] < losses[0]


@pytest.mark.parametrize("decay", [0.9, 0.99])
def test_ema_copy(decay):
    torch.manual_seed(0)
    model = mlp(32)
    ema = copy.deepcopy(model).requires_grad_(False)
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    x = torch.randn(64, 16)
    for step in range(STEPS):
        loss = regression(model, (x, x.sum(1, keepdim=True)))
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            for e, p in zip(ema.parameters(), model.parameters()):
                e.lerp_(p, 1 - decay)
        if step % 5 == 4:
            best = copy.deepcopy(model)  # keep the best so far
    assert best is not None


@pytest.mark.parametrize("batch_size", [8, 16])
def test_dataloader_epoch(batch_size):
    torch.manual_seed(0)
    x = torch.randn(128, 16)
    loader = DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=batch_size, shuffle=True)
    model = mlp(32)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    first = last = None
    for xb, yb in loader:
        loss = nn.functional.mse_loss(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        first = loss.item() if first is None else first
        last = loss.item()
    assert last < first * 2
'''


def write_suite(folder: str, steps: int) -> None:
    with open(os.path.join(folder, "conftest.py"), "w") as fh:
        fh.write(CONFTEST)
    with open(os.path.join(folder, "test_training_steps.py"), "w") as fh:
        fh.write(TESTS.format(steps=steps))


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_once(folder: str, with_plugin: bool) -> tuple[float, float, float, int]:
    report = os.path.join(folder, "junit.xml")
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", f"--junitxml={report}",
           folder]
    if with_plugin:
        cmd.append("--graphleaf")
    start, cpu = time.perf_counter(), _children_cpu()
    r = subprocess.run(cmd, cwd=folder, capture_output=True, text=True)
    wall, cpu = time.perf_counter() - start, _children_cpu() - cpu
    if r.returncode != 0:
        sys.exit(f"the suite failed ({' '.join(cmd)}):\n{r.stdout}\n{r.stderr}")
    suite = ET.parse(report).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    return float(suite.get("time")), wall, cpu, int(suite.get("tests"))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds of (without, with); default 3")
    parser.add_argument("--steps", type=int, default=20, help="optimizer steps per test; default 20")
    parser.add_argument("--keep", metavar="DIR", help="write the suite to DIR and keep it")
    args = parser.parse_args(argv)
    folder = args.keep or tempfile.mkdtemp(prefix="graphleaf-bench-")
    os.makedirs(folder, exist_ok=True)
    write_suite(folder, args.steps)
    runs: dict[bool, list[tuple[float, float, float]]] = {False: [], True: []}
    try:
        run_once(folder, False)  # warm the file caches (torch's .so files, the .pyc)
        for i in range(args.rounds):
            order = (False, True) if i % 2 == 0 else (True, False)
            for with_plugin in order:
                session, wall, cpu, tests = run_once(folder, with_plugin)
                runs[with_plugin].append((session, wall, cpu))
            a, b = runs[False][-1], runs[True][-1]
            print(f"round {i + 1}: without {a[0]:.2f} s session / {a[1]:.2f} s process / {a[2]:.2f} s CPU; "
                  f"with --graphleaf {b[0]:.2f} s / {b[1]:.2f} s / {b[2]:.2f} s  ({tests} tests)")
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
    med = {k: tuple(statistics.median(r[i] for r in v) for i in range(3)) for k, v in runs.items()}
    print(textwrap.dedent(f"""\
        median session: without {med[False][0]:.2f} s, with --graphleaf {med[True][0]:.2f} s: ratio {med[True][0] / med[False][0]:.2f}x
        median process: without {med[False][1]:.2f} s, with --graphleaf {med[True][1]:.2f} s: ratio {med[True][1] / med[False][1]:.2f}x
        median CPU: without {med[False][2]:.2f} s, with --graphleaf {med[True][2]:.2f} s: ratio {med[True][2] / med[False][2]:.2f}x"""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
