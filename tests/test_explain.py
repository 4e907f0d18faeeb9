"""``graphleaf explain`` end to end, through ``python -m flake8_graphleaf.cli.explain`` in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # end to end: run by `python -m pytest -m slow` and .ci/run

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = os.path.join("fixtures", "models")


def explain(*args, cwd=ROOT, pre=None):
    if pre is None:
        cmd = [sys.executable, "-m", "flake8_graphleaf.cli.explain", *args]
    else:  # run with some setup first, e.g. torch made unimportable
        code = pre + "\nimport sys\nfrom flake8_graphleaf.cli.explain import main\nsys.exit(main(sys.argv[1:]))"
        cmd = [sys.executable, "-c", code, *args]
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300, env=env)


# --------------------------------------------------------------- without torch (runs everywhere)

NO_TORCH = "import sys; sys.modules['torch'] = None"


def test_without_torch_prints_install_hint_and_exits_2():
    r = explain(os.path.join(MODELS, "cache_last_output.py") + ":make_model", pre=NO_TORCH)
    assert r.returncode == 2, r.stderr
    assert "pip install 'flake8-graphleaf[verify]'" in r.stderr and "pip install torch" in r.stderr
    assert "Traceback" not in r.stderr


def test_linter_and_targets_do_not_import_torch():
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "import flake8_graphleaf.analysis, flake8_graphleaf.plugin, flake8_graphleaf.runtime.targets, flake8_graphleaf.cli.explain\n"
        "print('ok')"
    )
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


@pytest.mark.parametrize(
    "target, message",
    [
        ("no_colon_here", "expected 'package.module:callable' or 'path/to/file.py:callable'"),
        ("fixtures/models/does_not_exist.py:make_model", "file 'fixtures/models/does_not_exist.py' does not exist"),
        ("fixtures/models/cache_last_output.py:make_modle", "has no attribute 'make_modle'"),
        ("no_such_package.models:make_model", "no module named 'no_such_package'"),
        ("fixtures/models/cache_last_output.py:EXPECT_CRASH", "is a bool, not a callable"),
    ],
)
def test_bad_target_exits_2_with_a_clear_message(target, message):
    r = explain(target)
    assert r.returncode == 2
    assert message in r.stderr
    assert "Traceback" not in r.stderr


# --------------------------------------------------------------- with torch


@pytest.mark.parametrize(
    "target",
    [os.path.join(MODELS, "cache_last_output.py") + ":make_model", "fixtures.models.cache_last_output:make_model"],
    ids=["path", "module"],
)
@pytest.mark.torch
def test_both_target_forms_exit_1_and_name_the_line(target):
    pytest.importorskip("torch")
    r = explain(target)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "copy.deepcopy(model): RuntimeError: Only Tensors created explicitly by the user" in r.stdout
    assert "model.cache  (4, 4) float32 cpu grad_fn=AddmmBackward0" in r.stdout
    assert "cache_last_output.py:15 GLF001 (traced) self.cache = out" in r.stdout  # traced by default


@pytest.mark.torch
def test_negative_exits_0():
    pytest.importorskip("torch")
    r = explain(os.path.join(MODELS, "no_grad_buffer.py") + ":make_model")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "copy.deepcopy(model): OK" in r.stdout


@pytest.mark.torch
def test_absolute_path_from_another_directory(tmp_path):
    pytest.importorskip("torch")
    target = os.path.join(ROOT, MODELS, "seg_head_loss.py") + ":make_model"
    r = explain(target, cwd=str(tmp_path))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "model.head.loss" in r.stdout and "GLF001 (traced) self.loss = F.cross_entropy" in r.stdout


@pytest.mark.torch
def test_trace_and_explicit_inputs():
    pytest.importorskip("torch")
    path = os.path.join(MODELS, "running_mean_buffer.py")
    r = explain(path + ":make_model", "--inputs", path + ":make_inputs", "--trace")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "model.norm.running_mean" in r.stdout
    assert "running_mean_buffer.py:15 GLF004 (traced)" in r.stdout


@pytest.mark.torch
def test_eval_mode_skips_the_training_branch():
    pytest.importorskip("torch")
    # RunningNorm updates its buffer only when self.training.
    r = explain(os.path.join(MODELS, "running_mean_buffer.py") + ":make_model", "--eval")
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.torch
def test_hook_fixture_names_the_hook_object():
    pytest.importorskip("torch")
    r = explain(os.path.join(MODELS, "forward_hook_saver.py") + ":make_model")
    assert r.returncode == 1
    assert "._forward_hooks[" in r.stdout and "].__self__.hidden" in r.stdout
    assert "forward_hook_saver.py:15 GLF003 (traced) self.hidden = output" in r.stdout  # a hook object: recorded too


@pytest.mark.torch
def test_missing_inputs_and_failing_model_exit_2(tmp_path):
    pytest.importorskip("torch")
    f = tmp_path / "m.py"
    f.write_text(
        "import torch\n"
        "def make_model():\n    return torch.nn.Linear(2, 2)\n"
        "def broken():\n    raise ValueError('boom')\n"
        "def not_a_module():\n    return 3\n"
    )
    r = explain(f"{f}:make_model")
    assert r.returncode == 2 and "no inputs" in r.stderr
    r = explain(f"{f}:broken", "--inputs", f"{f}:make_model")
    assert r.returncode == 2 and "ValueError: boom" in r.stderr and "Traceback" not in r.stderr
    r = explain(f"{f}:not_a_module", "--inputs", f"{f}:make_model")
    assert r.returncode == 2 and "not a torch.nn.Module" in r.stderr


@pytest.mark.torch
def test_the_step_is_traced_by_default():
    pytest.importorskip("torch")
    path = os.path.join(MODELS, "running_mean_buffer.py")
    r = explain(path + ":make_model")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "running_mean_buffer.py:15 GLF004 (traced)" in r.stdout
    r = explain(path + ":make_model", "--no-trace")
    assert "running_mean_buffer.py:15 GLF004 self.running_mean" in r.stdout and "(traced)" not in r.stdout


@pytest.mark.torch
def test_target_and_run_are_exclusive():
    r = explain(os.path.join(MODELS, "cache_last_output.py") + ":make_model", "--run", "x.py")
    assert r.returncode == 2 and "not both" in r.stderr
    r = explain()
    assert r.returncode == 2 and "give a TARGET" in r.stderr
