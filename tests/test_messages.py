"""What a user reads: one message grammar for every code (analysis/messages.py), the same from flake8
and the CLI, and witnesses in the user's own lines.

fixtures/messages/tiny_classifier.py is a training script as a user writes one: a TinyClassifier
whose Block's Attention keeps its softmax, a forward hook that collects activations in
``model.activations[name]``, and an EMA copy after each step (which really fails: see
``test_the_fixture_really_fails_at_the_copy``).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from test_cli import FIXTURES, ROOT, run

SCRIPT = FIXTURES / "messages" / "tiny_classifier.py"
LINE = re.compile(r"^(?P<path>[^:]+):(?P<line>\d+):(?P<col>\d+): (?P<code>GLF\d{3}) (?P<message>.*)$")


def _check(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return run("check", "--isolated", "--no-cache", *args, cwd=cwd)


def _messages(stdout: str) -> dict[tuple[int, str], str]:
    out = {}
    for line in stdout.splitlines():
        m = LINE.match(line)
        if m:
            out[(int(m.group("line")), m.group("code"))] = m.group("message")
    return out


def _flake8(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "flake8", "--isolated", "--select=GLF", *args],
                          capture_output=True, text=True, cwd=cwd or ROOT)


def test_the_copy_names_the_object_its_class_each_path_and_each_storing_line():
    r = _check("--output-format", "concise", str(SCRIPT))
    assert r.returncode == 1, r.stderr
    found = _messages(r.stdout)
    assert set(found) == {(21, "GLF001"), (48, "GLF003"), (62, "GLF202")}, r.stdout
    assert found[(62, "GLF202")] == (
        "copy.deepcopy(model) will raise: model (TinyClassifier) keeps a tensor on the autograd graph in "
        "model.block.attn.last_attn (GLF001 at line 21, stored by train() -> TinyClassifier.forward -> "
        "Block.forward -> Attention.forward), and in model.activations[...] (GLF003 at line 48, stored by "
        "train() -> hook (registered hook)): fix those lines, or copy with state_dict()")


def test_each_store_names_its_class_and_the_copy_that_fails():
    found = _messages(_check("--output-format", "concise", str(SCRIPT)).stdout)
    assert found[(21, "GLF001")] == (
        "'self.last_attn' (Attention) keeps a tensor on the autograd graph (from self.qkv(...)); "
        "copy.deepcopy(model) at line 62 will raise (it reaches it as model.block.attn.last_attn): "
        "use a local variable, or store .detach()")
    assert found[(48, "GLF003")].startswith(
        "'model.activations' (TinyClassifier) is given a tensor on the autograd graph (from the output a forward "
        "hook is given), stored by train() -> hook (registered hook); copy.deepcopy(model) at line 62 will raise "
        "(it reaches it as model.activations[...])")
    text = "\n".join(found.values())
    for old in ("the hook hook()", "module-level code ->", "the Attention object", "(its self.", "forward() -> forward()"):
        assert old not in text, old


def test_flake8_and_the_cli_say_the_same():
    cli = _messages(_check("--output-format", "concise", str(SCRIPT.relative_to(ROOT)), cwd=ROOT).stdout)
    f8 = _flake8(str(SCRIPT.relative_to(ROOT)))
    assert f8.returncode == 1, f8.stderr
    assert _messages(f8.stdout) == cli and cli, (f8.stdout, cli)


def test_a_copy_lists_every_store_then_how_many_more(tmp_path):
    """Five stores in five classes under one model: the copy names three, then "and 2 more"; each
    store names the copy."""
    layers = "".join(f'''
class Layer{i}(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        self.cache{i} = self.lin(x)
        return self.cache{i}
''' for i in range(5))
    (tmp_path / "net.py").write_text(f'''import copy

import torch
import torch.nn as nn
{layers}

class Net(nn.Module):
    def __init__(self):
        super().__init__()
{"".join(f"        self.l{i} = Layer{i}()" + chr(10) for i in range(5))}
    def forward(self, x):
{"".join(f"        x = self.l{i}(x)" + chr(10) for i in range(5))}        return x


net = Net()
net(torch.randn(2, 4)).sum().backward()
snapshot = copy.deepcopy(net)
''')
    r = _check("--output-format", "concise", "net.py", cwd=tmp_path)
    found = _messages(r.stdout)
    (copy_site,) = [m for (line, code), m in found.items() if code == "GLF202"]
    lines = [n for n, text in enumerate((tmp_path / "net.py").read_text().splitlines(), 1) if ".cache" in text
             and "return" not in text]
    assert copy_site.startswith(f"copy.deepcopy(net) will raise: net (Net) keeps a tensor on the autograd graph in "
                                f"net.l0.cache0 (GLF001 at line {lines[0]}, stored by Layer0.forward), and in "
                                f"net.l1.cache1 (GLF001 at line {lines[1]}"), copy_site
    assert copy_site.endswith(", and 2 more: fix those lines, or copy with state_dict()"), copy_site
    stores = [m for (line, code), m in found.items() if code == "GLF001"]
    assert len(stores) == 5, r.stdout
    copy_line = next(line for (line, code) in found if code == "GLF202")
    for i in range(5):
        assert any(m.startswith(f"'self.cache{i}' (Layer{i}) keeps") and
                   f"copy.deepcopy(net) at line {copy_line} will raise (it reaches it as net.l{i}.cache{i})" in m
                   for m in stores), (i, stores)


def test_a_lower_level_keeps_its_confidence_clause(tmp_path):
    (tmp_path / "m.py").write_text('''import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        self.seen = x
        return self.lin(x)
''')
    found = _messages(_check("--confidence", "medium", "--output-format", "concise", "m.py", cwd=tmp_path).stdout)
    assert found[(10, "GLF001")] == (
        "'self.seen' (Net) keeps a tensor that may be on the autograd graph (from argument 'x'); copy.deepcopy(model) "
        "will raise after forward if it is: use a local variable, or store .detach() [medium confidence: taken on "
        "trust: argument 'x' is taken to be an activation: Net feeds it into a layer or parameter]")


AS_WRITTEN = [19, "q, k, v = self.qkv(x).chunk(3, dim=-1)"], [20, "scores = q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5"]


def test_witness_steps_quote_the_lines_as_written_in_json_sarif_and_text():
    items = json.loads(_check("--output-format", "json", str(SCRIPT)).stdout)
    copy_site = next(i for i in items if i["code"] == "GLF202")
    steps = copy_site["witness"]["steps"]
    assert steps[:2] == list(map(list, AS_WRITTEN)), steps  # not ast.unparse's "** (-0.5)"
    assert steps[-1] == [62, "ema = copy.deepcopy(model)"], steps  # the copy's own line, not "copy.deepcopy(...)"
    source = SCRIPT.read_text().splitlines()
    for item in items:
        for line, code in item["witness"]["steps"]:
            assert code == source[line - 1].strip(), (line, code)

    sarif = json.loads(_check("--output-format", "sarif", str(SCRIPT)).stdout)
    (result,) = [r for r in sarif["runs"][0]["results"] if r["ruleId"] == "GLF202"]
    flow = result["codeFlows"][0]["threadFlows"][0]["locations"]
    texts = [(s["location"]["physicalLocation"]["region"]["startLine"], s["location"]["message"]["text"]) for s in flow]
    assert texts[:2] == list(map(tuple, AS_WRITTEN)), texts

    text = _check("--show-witness", str(SCRIPT)).stdout
    assert "   20: scores = q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5" in text, text
    assert "** (-0.5)" not in text


@pytest.mark.slow  # explain --run: the fixture run with torch (the other explain --run tests are slow too)
@pytest.mark.torch
def test_explain_prints_the_same_message_as_check():
    found = _messages(_check("--output-format", "concise", str(SCRIPT)).stdout)
    r = run("explain", "--run", str(SCRIPT), cwd=ROOT)
    if "needs torch" in r.stderr:
        pytest.skip("torch is not installed")
    assert f"static: GLF202 {found[(62, 'GLF202')]}" in r.stdout, r.stdout


@pytest.mark.slow  # the fixture run with torch: what the messages above describe, confirmed at run time
@pytest.mark.torch
def test_the_fixture_really_fails_at_the_copy():
    pytest.importorskip("torch")
    ran = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=300)
    assert ran.returncode != 0 and "graph leaves" in ran.stderr, ran.stderr
    assert 'line 62, in train' in ran.stderr, ran.stderr
