"""``graphleaf explain --run SCRIPT``: the incident scripts in fixtures/incidents/, end to end in a subprocess."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INCIDENTS = os.path.join("fixtures", "incidents")

pytestmark = [pytest.mark.torch, pytest.mark.slow]


def run(*args, cwd=ROOT, module="flake8_graphleaf"):
    pytest.importorskip("torch")
    cmd = [sys.executable, "-m", module, "explain", "--run", *args] if module == "flake8_graphleaf" else \
        [sys.executable, "-m", module, "--run", *args]
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=120, env=env)


# (script, what the report must name: the path and description, then the storing line)
LOCATED = {
    "lightning_step.py": [
        "copy.deepcopy raised the graph-leaf error at fixtures/incidents/lightning_step.py:37",
        "module.last_loss  () float32 cpu grad_fn=MseLossBackward0",
        "lightning_step.py:17 GLF001 (traced) self.last_loss = loss",
    ],
    "beam_search.py": [
        "copy.deepcopy raised the graph-leaf error at fixtures/incidents/beam_search.py:16",
        "self.hidden  (1, 1, 8) float32 cpu grad_fn=StackBackward0",
        "beam_search.py:12 GLF001 (traced) self.hidden = hidden  # decoder state, straight from the GRU",
    ],
    "distill_teacher.py": [
        "at fixtures/incidents/distill_teacher.py:26",
        "student.feats['body']  (5, 12) float32 cpu grad_fn=ReluBackward0",
        "distill_teacher.py:19 GLF002 (traced) self.feats[\"body\"] = h",
    ],
    "eval_copy.py": [
        "at fixtures/incidents/eval_copy.py:34",
        "static: GLF202 copy.deepcopy(model) will raise",
        "model.val_logits  (8, 3) float32 cpu grad_fn=AddmmBackward0",
        "eval_copy.py:17 GLF001 (traced) self.val_logits = logits",
    ],
    "dataloader_workers.py": [
        "a DataLoader worker failed on tensors that require grad at fixtures/incidents/dataloader_workers.py:12",
        "dataset.tensors[0]  (16, 3) float32 cpu requires_grad=True (a leaf)",
        "dataloader_workers.py:10 built: dataset = TensorDataset(features, labels)",
        "dataloader_workers.py:11 given to a DataLoader: loader = DataLoader(dataset, batch_size=4, num_workers=2)   [GLF301]",
    ],
    "mp_queue.py": [
        "Queue.put(...) of an object, pickled in the queue's feeder thread, raised the process-boundary error "
        "at fixtures/incidents/mp_queue.py:21",
        "out  (4, 2) float32 cpu grad_fn=AddmmBackward0",
        "mp_queue.py:21 sent: queue.put(out)",
        "static: GLF301",
    ],
    "mp_spawn_args.py": [
        "raised the process-boundary error at fixtures/incidents/mp_spawn_args.py:16",
        "process._args[0]  (4,) float32 cpu grad_fn=SqueezeBackward1",
        "mp_spawn_args.py:15 built: worker = ctx.Process(target=evaluate, args=(scores,))   [GLF301]",
    ],
    # stores on objects that are not modules, recorded while the script runs
    "trainer_wrapper.py": [
        "copy.deepcopy raised the graph-leaf error at fixtures/incidents/trainer_wrapper.py:29",
        "trainer.last_loss  () float32 cpu grad_fn=MseLossBackward0",
        "trainer_wrapper.py:20 GLF001 (traced) self.last_loss = loss  # shown by the progress bar",
    ],
    "ema_helper.py": [
        "ema.shadow['weight']  (2, 5) float32 cpu grad_fn=AddBackward0",
        "ema_helper.py:16 GLF002 (traced) self.shadow[name] = self.decay * self.shadow[name] + (1 - self.decay) * p",
    ],
    "hook_closure.py": [
        "model.activations['body']  (4, 6) float32 cpu grad_fn=AddmmBackward0",
        "hook_closure.py:13 stored: outputs[module.tag] = output  # the live activation, on the graph",
    ],
    "cache_object.py": [
        "model.recent.items[0]  (2, 4) float32 cpu grad_fn=AddmmBackward0",
        "cache_object.py:15 stored: self.items.append(value)",
    ],
    # a child that cannot send its result: reported at once, the parent does not wait forever
    "loader_batch_none.py": [
        "a DataLoader worker (worker ",
        "to the main process (batch_size=None sends each item as it is, and this one is on the autograd graph) "
        "at fixtures/incidents/loader_batch_none.py:22",
        "dataset.items[0]  (2,) float32 cpu grad_fn=ViewBackward0",
        "loader_batch_none.py:10 GLF001 (traced) self.items = [encoder(r) for r in raw]  # computed with grad on",
        "(the parent process would wait forever for that result: graphleaf explain stops the script here, exit 1)",
    ],
    "worker_result_put.py": [
        "could not send its result to its parent: Queue.put(...) at fixtures/incidents/worker_result_put.py:10",
        "obj  (4, 2) float32 cpu grad_fn=AddmmBackward0",
        "worker_result_put.py:10 sent: queue.put(model(torch.randn(4, 3)))  # the result, still on the graph",
    ],
}


@pytest.mark.parametrize("script", sorted(LOCATED))
def test_incident_is_located_with_its_storing_line(script):
    r = run(os.path.join(INCIDENTS, script))
    assert r.returncode == 1, r.stdout + r.stderr
    for text in LOCATED[script]:
        assert text in r.stdout, f"{text!r} not in:\n{r.stdout}\n{r.stderr}"
    assert "no store of it was recorded" not in r.stdout
    assert "Traceback" not in r.stdout


CLEAN = sorted(f for f in os.listdir(os.path.join(ROOT, INCIDENTS)) if f.endswith("_clean.py"))


def test_every_incident_has_a_clean_twin():
    assert {f.replace("_clean", "") for f in CLEAN} <= set(LOCATED)
    assert len(CLEAN) >= 12


@pytest.mark.parametrize("script", CLEAN)
def test_clean_twin_exits_0(script):
    r = run(os.path.join(INCIDENTS, script))
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.rstrip().endswith("ran to the end; no graph-leaf error was raised")


def _script(tmp_path):
    f = tmp_path / "script.py"
    f.write_text(
        "import sys\n"
        "print('argv', sys.argv[1:], __name__)\n"
        "if sys.argv[1] == 'raise':\n    raise ValueError('bad config')\n"
        "if sys.argv[1] == 'exit':\n    sys.exit(int(sys.argv[2]))\n"
    )
    return f


def test_arguments_reach_the_script_and_its_exception_is_its_own(tmp_path):
    f = _script(tmp_path)
    r = run(str(f), "ok", "--lr", "3")
    assert r.returncode == 0 and "argv ['ok', '--lr', '3'] __main__" in r.stdout, r.stdout + r.stderr
    r = run(str(f), "raise")
    assert r.returncode == 3
    assert "Traceback" in r.stderr and "ValueError: bad config" in r.stderr and "flake8_graphleaf" not in r.stderr
    assert "the script's own error, not a graph-leaf error" in r.stderr


def test_the_scripts_exit_status(tmp_path):
    f = _script(tmp_path)
    r = run(str(f), "exit", "5")
    assert r.returncode == 3 and "exited with status 5 (its own sys.exit), not a graph-leaf error" in r.stderr
    r = run(str(f), "exit", "0")
    assert r.returncode == 0


def test_usage_errors_and_the_module_entry_point(tmp_path):
    r = run(str(tmp_path / "missing.py"))
    assert r.returncode == 2 and "does not exist" in r.stderr
    pytest.importorskip("torch")
    r = subprocess.run([sys.executable, "-m", "flake8_graphleaf", "explain", "--run"], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--run needs a SCRIPT" in r.stderr
    r = run(os.path.join(INCIDENTS, "eval_copy.py"), module="flake8_graphleaf.cli.explain")
    assert r.returncode == 1 and "model.val_logits" in r.stdout


def test_script_with_a_class_loaded_outside_sys_modules(tmp_path):
    """A config-driven trainer: the model's module is loaded from a path and never registered."""
    (tmp_path / "netdef.py").write_text(
        "import torch.nn as nn\n"
        "class Net(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(2, 2)\n"
        "    def forward(self, x):\n        self.cache = self.fc(x)\n        return self.cache\n"
    )
    (tmp_path / "train.py").write_text(
        "import copy, importlib.util, os, torch\n"
        "spec = importlib.util.spec_from_file_location('cfg_net', os.path.join(os.path.dirname(__file__), 'netdef.py'))\n"
        "mod = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(mod)\n"
        "model = mod.Net()\n"
        "model(torch.randn(3, 2)).sum().backward()\n"
        "ema = copy.deepcopy(model)\n"
    )
    r = run(str(tmp_path / "train.py"), cwd=str(tmp_path))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "model.cache  (3, 2) float32 cpu grad_fn=AddmmBackward0" in r.stdout
    assert "netdef.py:7 GLF001 (traced) self.cache = self.fc(x)" in r.stdout


def test_worker_items_made_by_getitem_name_its_return_line(tmp_path):
    """The dataset holds an encoder (parameters reach the workers fine) and computes each item with grad
    on: the report names __getitem__'s return line, not the encoder's parameters; computed under no_grad,
    the script runs to the end."""
    body = (
        "import torch, torch.nn as nn\n"
        "from torch.utils.data import DataLoader, Dataset\n"
        "class Encoded(Dataset):\n"
        "    def __init__(self):\n        self.encoder = nn.Linear(3, 2)\n        self.raw = torch.randn(8, 3)\n"
        "    def __len__(self):\n        return 8\n"
        "    def __getitem__(self, i):\n"
        "        {guard}return self.encoder(self.raw[i])\n"
        "if __name__ == '__main__':\n"
        "    print(len(list(DataLoader(Encoded(), batch_size=4, num_workers=1))))\n"
    )
    (tmp_path / "leaky.py").write_text(body.replace("{guard}", ""))
    r = run(str(tmp_path / "leaky.py"), cwd=str(tmp_path))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "the items its __getitem__ returns do" in r.stdout
    assert "<- leaky.py:10 made by the dataset's module 'encoder' (its parameters require grad): " \
        "return self.encoder(self.raw[i])" in r.stdout
    assert "encoder.weight" not in r.stdout
    (tmp_path / "clean.py").write_text(body.replace("{guard}", "with torch.no_grad():\n            "))
    r = run(str(tmp_path / "clean.py"), cwd=str(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr


# Roots above the store (fixtures/pytest/roots/callers.py, and its twin in roots_clean): a script per kind, what
# its report must name.  The same recorder as pytest --graphleaf's (tests/test_pytest_plugin.py).
CALLERS = {
    "eval_forward": (
        "model = callers.Head()\ncallers.output_shape(model, torch.randn(2, 4))\ncopy.deepcopy(model)\n",
        ["<- callers.py:20 GLF001 (traced) self.last = out  # kept for the plots, in eval mode",
         "<- callers.py:26 ran the forward that stored it, with grad on: return tuple(model(x).shape)  # an eval-mode "
         "forward, with grad on  (Head in eval mode; no backward went through what it stored: run it under "
         "torch.no_grad() unless its gradient is wanted)"]),
    "probe_while_building": (
        "copy.deepcopy(callers.Probed())\n",
        ["<- callers.py:37 GLF001 (traced) self.peak = h.max()  # kept at every forward",
         "<- callers.py:33 ran the forward that stored it, with grad on: self.width = self.forward(torch.zeros(1, 4))"
         ".shape[-1]  # a probe while building, with grad on  (while building Probed; "]),
    "constructor_argument": (
        "copy.deepcopy(callers.matches(torch.nn.Linear(3, 2), torch.rand(2, 4), torch.randn(2, 3)))\n",
        ["<- callers.py:44 stored: self.embedding = embedding",
         "<- callers.py:49 given to the constructor that stores it: return [Match(b, e) for b, e in zip(boxes, "
         "embeddings)]  # each embedding given to Match, with grad"]),
    "tensor_itself_copied": (
        "callers.with_copy(callers.activated(torch.nn.Linear(3, 2)(torch.randn(4, 3))), 'probs')\n",
        ["<- callers.py:54 stored: out[\"probs\"] = torch.softmax(logits, dim=-1)  # stored in the step's output",
         "<- callers.py:60 copied (the tensor itself): out[key + \"_kept\"] = copy.deepcopy(out[key])  # the tensor "
         "itself, deep-copied"]),
}


@pytest.mark.parametrize("kind", sorted(CALLERS))
def test_roots_above_the_store_are_named_and_their_twins_run(tmp_path, kind):
    body, expected = CALLERS[kind]
    script = "import copy\n\nimport torch\n\nimport callers\n\n" + body
    for twin, status in (("roots", 1), ("roots_clean", 0)):
        folder = tmp_path / twin
        folder.mkdir()
        shutil.copy(os.path.join(ROOT, "fixtures", "pytest", twin, "callers.py"), str(folder))
        (folder / "main.py").write_text(script)
        r = run("main.py", cwd=str(folder))
        assert r.returncode == status, r.stdout + r.stderr
        if status:
            for line in expected:
                assert line in r.stdout, r.stdout
