"""Sends to another process fixed where the graph tensor is: the item of a sent tuple that the
program's run says made it (``queue.put((t, obs, policy(obs)))``: ``policy(obs)``, not ``obs``), also
when the sender's file only gets the module as an argument. The fixed programs run with torch."""

from __future__ import annotations

import subprocess
import sys

import pytest

from test_cli import run

ACTORS = """\
import torch


def run_actor(policy, queue, steps):
    for t in range(steps):
        obs = torch.randn(1, 4)
        queue.put((t, obs, policy(obs)))
"""

MAIN = """\
import torch
import torch.multiprocessing as mp

from actors import run_actor


def main():
    torch.manual_seed(0)
    queue = mp.get_context("spawn").SimpleQueue()
    policy = torch.nn.Sequential(torch.nn.Linear(4, 2), torch.nn.Softmax(dim=-1))
    run_actor(policy, queue, steps=3)
    for _ in range(3):
        t, obs, probs = queue.get()
        print(t, [float(v).hex() for v in probs.flatten()], probs.requires_grad)


if __name__ == "__main__":
    main()
"""

NAMED = """\
import torch
import torch.multiprocessing as mp


def main():
    torch.manual_seed(0)
    queue = mp.get_context("spawn").SimpleQueue()
    model = torch.nn.Sequential(torch.nn.Linear(4, 2), torch.nn.GELU())
    for step in range(2):
        out = model(torch.randn(3, 4))
        queue.put((step, out))
        print(step, float(out.sum()).hex(), out.requires_grad)
    for _ in range(2):
        step, out = queue.get()
        print("got", step, float(out.sum()).hex())


if __name__ == "__main__":
    main()
"""


def _project(tmp_path):
    (tmp_path / "actors.py").write_text(ACTORS)
    (tmp_path / "main.py").write_text(MAIN)
    return tmp_path


def test_the_item_made_on_the_graph_is_detached_not_its_neighbour(tmp_path):
    proj = _project(tmp_path)
    r = run("fix", "--diff", ".", cwd=proj)
    assert "+        queue.put((t, obs, policy(obs).detach()))" in r.stdout, r.stdout + r.stderr
    assert "obs.detach()" not in r.stdout.replace("policy(obs).detach()", "")


def test_a_name_made_by_a_module_call_is_detached_where_it_is_sent(tmp_path):
    (tmp_path / "main.py").write_text(NAMED)
    r = run("fix", "--diff", ".", cwd=tmp_path)
    assert "+        queue.put((step, out.detach()))" in r.stdout, r.stdout + r.stderr


def _python(cwd):
    return subprocess.run([sys.executable, "main.py"], cwd=cwd, capture_output=True, text=True, timeout=300)


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("program", ["actors", "named"])
def test_the_fixed_sends_run_and_the_other_side_gets_the_same_values(tmp_path, program):
    pytest.importorskip("torch")
    if program == "actors":
        _project(tmp_path)
    else:
        (tmp_path / "main.py").write_text(NAMED)
    before = _python(tmp_path)
    assert before.returncode != 0 and "Cowardly refusing to serialize non-leaf tensor" in before.stderr
    fixed = run("fix", ".", cwd=tmp_path)  # safe fixes only
    assert fixed.returncode == 0 and "Fixed 1 finding in 1 file; 0 left." in fixed.stdout, fixed.stdout
    after = _python(tmp_path)
    assert after.returncode == 0, after.stderr
    if program == "actors":
        # the values the sender computed, bit for bit, without their graph on the other side
        torch = pytest.importorskip("torch")
        torch.manual_seed(0)
        policy = torch.nn.Sequential(torch.nn.Linear(4, 2), torch.nn.Softmax(dim=-1))
        want = []
        for t in range(3):
            probs = policy(torch.randn(1, 4)).detach()
            want.append(f"{t} {[float(v).hex() for v in probs.flatten()]} False")
        assert after.stdout.splitlines() == want
    else:
        lines = after.stdout.splitlines()
        sent = [ln.split()[1] for ln in lines if not ln.startswith("got")]
        assert [ln.split()[2] for ln in lines if ln.startswith("got")] == sent
        assert all(ln.endswith("True") for ln in lines if not ln.startswith("got"))  # the sender keeps its graph
    again = run("fix", ".", cwd=tmp_path)
    assert "Fixed 0 findings in 0 files; 0 left." in again.stdout, again.stdout


POOL = """\
import torch
import torch.multiprocessing as mp


def nearest(query, bank):
    sims = torch.stack([torch.cosine_similarity(query, b, dim=-1) for b in bank])
    return [float(s).hex() for s in sims]


def main():
    torch.manual_seed(0)
    encoder = torch.nn.Linear(4, 3)
    bank = [encoder(torch.randn(4)) for _ in range(3)]
    queries = [torch.randn(3) for _ in range(2)]
    with mp.get_context("spawn").Pool(1) as pool:
        found = pool.starmap(nearest, [(q, bank) for q in queries])
    print(found)
    print([nearest(q, bank) for q in queries])
    print(all(b.requires_grad for b in bank))


if __name__ == "__main__":
    main()
"""


def test_a_pool_s_tasks_get_detached_copies_whatever_their_shape(tmp_path):
    (tmp_path / "main.py").write_text(POOL)
    r = run("fix", "--diff", ".", cwd=tmp_path)  # safe
    assert ("pool.starmap(nearest, torch.utils._pytree.tree_map_only(torch.Tensor, lambda v: v.detach() if "
            "v.grad_fn is not None else v, [(q, bank) for q in queries]))") in r.stdout, r.stdout + r.stderr
    assert "bank = [encoder(torch.randn(4)).detach()" not in r.stdout  # the program's bank keeps its graph


@pytest.mark.torch
@pytest.mark.slow
def test_the_fixed_pool_runs_and_its_workers_compute_what_this_process_does(tmp_path):
    pytest.importorskip("torch")
    (tmp_path / "main.py").write_text(POOL)
    before = _python(tmp_path)
    assert before.returncode != 0 and "Cowardly refusing to serialize non-leaf tensor" in before.stderr
    fixed = run("fix", ".", cwd=tmp_path)
    assert "Fixed 1 finding in 1 file; 0 left." in fixed.stdout, fixed.stdout
    after = _python(tmp_path)
    assert after.returncode == 0, after.stderr
    workers, here, kept = after.stdout.splitlines()
    assert workers == here and kept == "True"  # the same similarities, bit for bit; the bank keeps its graph
    again = run("fix", "--unsafe-fixes", ".", cwd=tmp_path)
    assert "Fixed 0 findings in 0 files; 0 left." in again.stdout, again.stdout


def test_a_file_fixed_after_another_sees_its_new_text(tmp_path):
    """main.py's pool send is fixed (safe) before scoring.py is analysed: scoring.py's "made here"
    finding came from main.py's run, which no longer sends a graph tensor, so its unsafe
    ``.detach()`` (a gradient cut for every user of the embeddings) is not made."""
    (tmp_path / "scoring.py").write_text(
        "import torch\n\n\ndef embed_all(encoder, items):\n    return [encoder(x) for x in items]\n\n\n"
        "def nearest(query, bank):\n    return int(torch.stack([torch.cosine_similarity(query, b, dim=-1) "
        "for b in bank]).argmax())\n")
    (tmp_path / "main.py").write_text(
        "import torch\nimport torch.multiprocessing as mp\n\nfrom scoring import embed_all, nearest\n\n\n"
        "def main():\n    encoder = torch.nn.Linear(4, 3)\n    bank = embed_all(encoder, [torch.randn(4) for _ in range(5)])\n"
        "    with mp.get_context(\"spawn\").Pool(1) as pool:\n"
        "        print(pool.starmap(nearest, [(q, bank) for q in [torch.randn(3)]]))\n\n\n"
        "if __name__ == \"__main__\":\n    main()\n")
    before = run("check", "--unsafe-fixes", ".", cwd=tmp_path)
    assert "scoring.py:5:12: GLF301" in before.stdout, before.stdout
    original = (tmp_path / "scoring.py").read_text()
    r = run("fix", "--unsafe-fixes", ".", cwd=tmp_path)
    assert "main.py:11:15: GLF301 fixed: send the pool's tasks detached copies" in r.stdout, r.stdout
    assert "Fixed 1 finding in 1 file; 0 left." in r.stdout, r.stdout
    assert (tmp_path / "scoring.py").read_text() == original
