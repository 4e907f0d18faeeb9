"""``graphleaf verify`` over every fixture on CPU: a fix that stops being safe fails the build.

The expected outcome per fixture is what the fix table promises (see docs/verification.md);
fixtures whose fix has not landed (or is labelled differently) fail here until it does.
"""

from __future__ import annotations

import json
import re
import os
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, "fixtures", "models")

# fixture -> (overall status with --unsafe-fixes, label of the fix: "safe" | "unsafe" | None)
# PASS: identical results (or negative); DIFF: unsafe fix whose differences are listed;
# FAIL: intended failure (a positive fixture whose finding has no fix in the fix table).
EXPECTED = {
    "cache_last_output": ("PASS", "safe"),  # copy-safe __getstate__ (public attribute)
    "depth_encoder_features": ("PASS", "safe"),
    "detached_cache": ("PASS", None),
    "no_grad_buffer": ("PASS", None),
    "forward_hook_saver": ("PASS", "safe"),  # copy-safe on the hook holder
    "legacy_weight_norm": ("DIFF", "unsafe"),
    "running_mean_buffer": ("PASS", "safe"),  # read after the update: copy-safe, buffers detached in copies
    "seg_head_loss": ("PASS", "safe"),
    "style_transfer_content_loss": ("PASS", "safe"),  # the loss the loop back-propagates stays attached
    "lstm_state_kept": ("PASS", "safe"),  # the next call's reader keeps its gradient
    "buffer_read_after_update": ("PASS", "safe"),  # copy-safe: detaching would change the gradients
    "buffer_update_not_read": ("PASS", "safe"),
    "legacy_spectral_norm": ("DIFF", "unsafe"),
    "deepcopy_of_output": ("PASS", "unsafe"),
    "ema_callback": ("PASS", "safe"),
    "validation_cache": ("PASS", "safe"),
    "attention_maps_loss": ("PASS", "safe"),
    "aux_loss_augmented": ("PASS", "safe"),
    "hook_on_module_private": ("PASS", "safe"),
    "private_cache_renamed": ("PASS", "safe"),
    "private_inspected_detach": ("PASS", "safe"),
    "buffer_from_argument": ("PASS", "safe"),
    "setattr_dict_stores": ("PASS", "safe"),
    "existing_getstate": ("PASS", "safe"),
    "buffer_set_from_graph_tensor": ("PASS", "safe"),  # an existing graph tensor: copy-safe, never no_grad
    "buffer_keeps_earlier_graph_tensor": ("PASS", "safe"),  # .detach() of a tensor computed earlier
    "manual_batch_norm": ("PASS", "safe"),  # running stats in _buffers detached in copies
    "dynamic_setattr_names": ("PASS", "safe"),  # names made at run time: every graph tensor of the state
    "hook_register_buffer": ("PASS", "unsafe"),  # .detach() in hooks storing on the hooked nn.Linear
    "helper_object_state": ("PASS", "safe"),  # the helper object's class (same file) gets the copy-safe state
}

ALL = sorted(f[:-3] for f in os.listdir(FIXTURES) if f.endswith(".py") and not f.startswith("_"))

pytestmark = pytest.mark.torch


def _verify(tmp_path, *argv, name="out"):
    pytest.importorskip("torch")
    from flake8_graphleaf.cli import verify

    out = tmp_path / f"{name}.json"
    rc = verify.main([*argv, "--json", str(out)])
    return rc, json.loads(out.read_text())


@pytest.fixture(scope="module")
def unsafe_run(tmp_path_factory):
    rc, data = _verify(tmp_path_factory.mktemp("verify"), FIXTURES, "--device", "cpu", "--unsafe-fixes")
    return rc, {r["fixture"]: r for r in data["results"]}, data


def test_every_fixture_has_an_expectation():
    assert set(ALL) <= set(EXPECTED), f"add the new fixtures to EXPECTED: {sorted(set(ALL) - set(EXPECTED))}"


@pytest.mark.parametrize("name", ALL)
def test_fixture_outcome(unsafe_run, name):
    _, results, _ = unsafe_run
    r = results[name]
    status, label = EXPECTED[name]
    report = json.dumps(r, indent=1)
    assert r["checks"]["crash"]["status"] == "PASS", report
    assert r["status"] == status, report
    if status == "FAIL":
        assert r["checks"]["fix"]["status"] == "FAIL" and "no fix available" in r["checks"]["fix"]["detail"], report
        return
    labels = {a["applicability"] for a in r["applied"]}
    assert labels == ({label} if label else set()), report
    assert r["checks"]["deepcopy"]["status"] == "PASS", report
    if label == "safe" or label is None:
        assert r["differences"] == [], report
        assert "identical (bitwise)" in r["checks"]["same"]["detail"], report
    if status == "DIFF":
        assert r["differences"], report
        assert r["checks"]["safety"]["status"] == "DIFF", report


def test_weight_norm_only_changes_state_dict_keys(unsafe_run):
    r = unsafe_run[1]["legacy_weight_norm"]
    assert len(r["differences"]) == 1 and r["differences"][0].startswith("state_dict keys renamed"), r
    assert "weight_g -> blocks.0.conv.parametrizations.weight.original0" in r["differences"][0]


def test_style_transfer_keeps_the_gradient_through_the_loss(unsafe_run):
    r = unsafe_run[1]["style_transfer_content_loss"]
    assert r["differences"] == [], r
    assert all("__getstate__" in a["description"] for a in r["applied"]), r
    assert "original untouched" in r["checks"]["deepcopy"]["detail"], r


def test_copy_safe_fixtures_prove_detached_copies(unsafe_run):
    for name in ("cache_last_output", "forward_hook_saver", "lstm_state_kept", "aux_loss_augmented", "existing_getstate",
                 "buffer_set_from_graph_tensor", "manual_batch_norm", "dynamic_setattr_names", "running_mean_buffer",
                 "helper_object_state"):
        r = unsafe_run[1][name]
        assert "detached in the copy, the original untouched" in r["checks"]["deepcopy"]["detail"], r


def test_exit_code_and_table(unsafe_run, capsys):
    rc, results, data = unsafe_run
    assert rc == (0 if all(r["status"] != "FAIL" for r in results.values()) else 1)
    assert data["ok"] == (rc == 0)


def test_safe_fixes_only_without_unsafe_flag(tmp_path, capsys):
    paths = [os.path.join(FIXTURES, n + ".py") for n in ("cache_last_output", "hook_register_buffer")]
    rc, data = _verify(tmp_path, *paths, "--device", "cpu")
    res = {r["fixture"]: r for r in data["results"]}
    assert res["cache_last_output"]["status"] == "PASS"
    seg = res["hook_register_buffer"]
    assert seg["checks"]["fix"]["status"] == "SKIP" and "--unsafe-fixes" in seg["checks"]["fix"]["detail"]
    assert seg["applied"] == []
    assert rc == 0
    out = capsys.readouterr().out
    assert re.search(r"hook_register_buffer\s+cpu\s+PASS\s+SKIP\s+SKIP\s+SKIP\s+SKIP", out), out


def test_cuda_line_or_exit_2(tmp_path, capsys):
    torch = pytest.importorskip("torch")
    from flake8_graphleaf.cli import verify

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    rc = verify.main([os.path.join(FIXTURES, "detached_cache.py")])
    assert rc == 0
    assert "cuda: not available, skipped" in capsys.readouterr().out
    assert verify.main(["--device", "cuda", os.path.join(FIXTURES, "detached_cache.py")]) == 2
    assert "CUDA is not available" in capsys.readouterr().err


def _fake_fixer(replace_old, replace_new, applicability, code, line, cls, attr):
    from flake8_graphleaf.analysis.findings import Finding, Fix
    from flake8_graphleaf.fix.fixer import FixResult

    def fix(source, filename="<unknown>", *, unsafe=False, wanted=None, options=None, project=None):
        if replace_old not in source:
            return FixResult(source)
        f = Finding(code=code, line=line, col=0, message="fake", class_name=cls, attribute=attr,
                    fix=Fix(applicability, "hand-written fix for the test", ()))
        return FixResult(source.replace(replace_old, replace_new), applied=[f])

    return fix


def test_a_wrong_safe_fix_fails(tmp_path, monkeypatch):
    """A fixer that detaches the loss and calls it SAFE must be caught."""
    pytest.importorskip("torch")
    from flake8_graphleaf.runtime.verify import pipeline

    monkeypatch.setattr(pipeline, "_fix_source", _fake_fixer(
        "self.loss = F.cross_entropy(logits, target, ignore_index=255)",
        "self.loss = F.cross_entropy(logits, target, ignore_index=255).detach()",
        "safe", "GLF001", 18, "SegHead", "self.loss"))
    rc, data = _verify(tmp_path, os.path.join(FIXTURES, "seg_head_loss.py"), "--device", "cpu")
    r = data["results"][0]
    assert rc == 1 and r["status"] == "FAIL"
    assert r["checks"]["same"]["status"] == "FAIL" and r["checks"]["safety"]["status"] == "FAIL"
    assert any("gradient of parameter head.conv.weight: lost" in d for d in r["differences"])


def test_a_fix_that_changes_outputs_fails(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    from flake8_graphleaf.runtime.verify import pipeline

    monkeypatch.setattr(pipeline, "_fix_source", _fake_fixer(
        "        self.cache = out\n        return out", "        return out * 1.0001",
        "safe", "GLF001", 15, "CachingMLP", "self.cache"))
    rc, data = _verify(tmp_path, os.path.join(FIXTURES, "cache_last_output.py"), "--device", "cpu")
    r = data["results"][0]
    assert rc == 1
    assert any(d.startswith("forward output #0: differs") for d in r["differences"]), r


def test_a_fix_that_does_not_fix_fails(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    from flake8_graphleaf.runtime.verify import pipeline

    monkeypatch.setattr(pipeline, "_fix_source", _fake_fixer(
        "        self.cache = out\n", "        self.cache = out  # fixed?\n",
        "safe", "GLF001", 15, "CachingMLP", "self.cache"))
    rc, data = _verify(tmp_path, os.path.join(FIXTURES, "cache_last_output.py"), "--device", "cpu")
    r = data["results"][0]
    assert rc == 1 and r["checks"]["deepcopy"]["status"] == "FAIL"
    assert any(p.startswith("model.cache") for p in r["graph_tensors"]), r


# GLF005 has no automatic fix (the reason points to torch.nn.utils.parametrize): verify must fail it.
WEIGHT_DROP = textwrap.dedent('''
    import torch
    import torch.nn as nn


    class DropLinear(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)
            w = self.lin.weight
            del self.lin._parameters["weight"]
            self.lin.register_parameter("weight_raw", nn.Parameter(w.data))
            setattr(self.lin, "weight", self.lin.weight_raw * 1.0)

        def forward(self, x):
            return self.lin(x)


    def make_model():
        torch.manual_seed(0)
        return DropLinear()


    def make_inputs():
        return (torch.randn(2, 4),)


    EXPECT_CRASH = True
''')


def test_junit_xml(tmp_path):
    pytest.importorskip("torch")
    from flake8_graphleaf.cli import verify

    xml = tmp_path / "v.xml"
    nofix = tmp_path / "weight_drop_nofix.py"
    nofix.write_text(WEIGHT_DROP)
    rc = verify.main([str(nofix), os.path.join(FIXTURES, "cache_last_output.py"),
                      "--device", "cpu", "--junit-xml", str(xml)])
    assert rc == 1
    suite = ET.parse(xml).getroot()
    assert suite.tag == "testsuite" and int(suite.get("tests")) == 10
    failures = [c for c in suite.iter("testcase") if c.find("failure") is not None]
    assert [c.get("classname") for c in failures] == ["graphleaf.verify.weight_drop_nofix"]
    assert suite.get("failures") == "1"


USER_MODEL = textwrap.dedent('''
    import torch, torch.nn as nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)
            self.history = {}

        def forward(self, x):
            y = self.lin(x)
            self.history["last"] = y
            return y

    def build():
        return Net()

    def inputs():
        return (torch.randn(2, 3),)
''')


def test_user_model_names_the_graph_tensors(tmp_path, capsys):
    pytest.importorskip("torch")

    path = tmp_path / "user_model.py"
    path.write_text(USER_MODEL)
    rc, data = _verify(tmp_path, "--model", f"{path}:build", "--inputs", f"{path}:inputs", "--device", "cpu")
    r = data["results"][0]
    assert r["checks"]["crash"]["status"] == "INFO" and "graph-leaves" in r["checks"]["crash"]["detail"]
    assert any("history" in p for p in r["graph_tensors"]), r
    if rc == 1:  # until the container fix for a dict store lands, the deepcopy check names the paths
        assert r["checks"]["deepcopy"]["status"] in ("FAIL", "SKIP") or r["checks"]["fix"]["status"] == "FAIL"
    out = capsys.readouterr().out
    assert "history" in out


def test_user_model_fixed_by_the_fixer(tmp_path):
    pytest.importorskip("torch")
    rc, data = _verify(tmp_path, "--model", os.path.join(FIXTURES, "cache_last_output.py") + ":make_model",
                       "--device", "cpu")
    r = data["results"][0]
    assert rc == 0, r
    assert r["checks"]["deepcopy"]["status"] == "PASS" and r["checks"]["same"]["status"] == "PASS"


def test_bad_target_exits_2(tmp_path, capsys):
    pytest.importorskip("torch")
    from flake8_graphleaf.cli import verify

    assert verify.main(["--model", str(tmp_path / "nope.py") + ":make", "--device", "cpu"]) == 2
    assert "does not exist" in capsys.readouterr().err


NO_TORCH = textwrap.dedent('''
    import sys
    sys.modules["torch"] = None  # "import torch" now raises ImportError
    import flake8_graphleaf.cli.verify as verify
    import flake8_graphleaf.fix.fixer, flake8_graphleaf.analysis
    from flake8_graphleaf.fix.fixer import fix_source
    fix_source(open(sys.argv[1]).read(), sys.argv[1])
    sys.exit(verify.main(sys.argv[2:]))
''')


@pytest.mark.torch
def test_without_torch_says_how_to_install(tmp_path):
    script = tmp_path / "no_torch.py"
    script.write_text(NO_TORCH)
    proc = subprocess.run([sys.executable, str(script), os.path.join(FIXTURES, "cache_last_output.py"), FIXTURES],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "pip install 'flake8-graphleaf[verify]'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_user_model_from_several_files_is_fixed_in_each(tmp_path):
    """verify --model fixes every project file the built model's classes come from (blocks.py,
    norms.py, and dists.py: the class of a helper object whose finding model.py reports), runs the
    fixed project, and leaves the user's files and modules as they were."""
    pytest.importorskip("torch")
    import shutil

    proj = tmp_path / "multifile"
    shutil.copytree(os.path.join(ROOT, "fixtures", "projects", "multifile"), proj)
    before = {p: p.read_bytes() for p in proj.rglob("*.py")}
    target = proj / "netpkg" / "model.py"
    rc, data = _verify(tmp_path, "--model", f"{target}:make_model", "--device", "cpu")
    r = data["results"][0]
    assert rc == 0, json.dumps(r, indent=1)
    files = {a["file"] for a in r["applied"]}
    assert files == {"netpkg/blocks.py", "netpkg/norms.py", "netpkg/model.py"}, r["applied"]
    helper = [a for a in r["applied"] if a["file"] == "netpkg/model.py"]
    assert len(helper) == 1 and "ActionDist.__getstate__ in dists.py" in helper[0]["description"], helper
    assert r["checks"]["same"]["status"] == "PASS" and "identical (bitwise)" in r["checks"]["same"]["detail"]
    assert r["checks"]["deepcopy"]["status"] == "PASS" and "original untouched" in r["checks"]["deepcopy"]["detail"]
    assert {p: p.read_bytes() for p in proj.rglob("*.py")} == before  # verify fixes copies only
    import netpkg.blocks  # the original modules are back in sys.modules

    assert os.path.realpath(netpkg.blocks.__file__) == os.path.realpath(proj / "netpkg" / "blocks.py")
