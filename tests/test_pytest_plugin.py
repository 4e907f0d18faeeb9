"""``pytest --graphleaf``, run by pytester on the training-code fixtures in fixtures/pytest/ (leaky, and clean twins)."""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil

import pytest

torch = pytest.importorskip("torch")

pytest_plugins = ["pytester"]
pytestmark = [pytest.mark.torch, pytest.mark.graphleaf_ignore]  # the inner runs record; an outer --graphleaf would not let them

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, "fixtures", "pytest")

# What the leaky suite must report: (storing line, code, attribute path, test id).
LEAKY = [
    ("seq2seq.py:14", "GLF001", "model.encoder.last_hidden", "test_training.py::test_seq2seq_step_lowers_the_loss"),
    ("seq2seq.py:26", "GLF002", "model.attend.history[0]", "test_training.py::test_seq2seq_step_lowers_the_loss"),
    ("training.py:17", "GLF002", "trainer.stats['loss'][0]", "test_training.py::test_trainer_checkpoint_is_best_effort"),
    ("training.py:28", "GLF002", "ema.shadow['weight']", "test_training.py::test_ema_follows_the_weights"),
    ("training.py:35", "GLF002", "model.metrics['train/loss']", "test_training.py::test_metrics_are_logged"),
    ("seq2seq.py:14", "GLF001", "model.encoder.last_hidden", "test_exact.py::test_values_and_graph_are_untouched"),
]
LEAKY_TESTS = ["test_training.py", "test_exact.py", "test_ignored.py"]


def suite(pytester: pytest.Pytester, name: str) -> None:
    shutil.copytree(os.path.join(FIXTURES, name), str(pytester.path), dirs_exist_ok=True)


_KEEP = ("torch", "numpy", "flake8_graphleaf", "multiprocessing", "zope", "readline")


@pytest.fixture(autouse=True)
def _keep_torch_loaded(pytester, monkeypatch):
    """An inline pytester run drops the modules it imported when it ends; a torch submodule imported
    lazily by the inner run (the optimizers import torch._dynamo pieces) that registers an operator
    library cannot be imported twice.  Keep torch (and this package, and multiprocessing, whose classes
    the recorder patches) loaded between inline runs; the fixtures' own modules (seq2seq, training,
    data) are still dropped, as pytester does."""
    from _pytest.pytester import SysModulesSnapshot

    name = "_Pytester__take_sys_modules_snapshot"
    if hasattr(pytester, name) and hasattr(pytester, "_sys_modules_snapshot"):
        def snapshot():
            return SysModulesSnapshot(preserve=lambda m: m.startswith(_KEEP))

        monkeypatch.setattr(pytester, name, snapshot)  # each inline run's
        monkeypatch.setattr(pytester, "_sys_modules_snapshot", snapshot())  # the test's own
    else:  # another pytest: run in a subprocess instead
        monkeypatch.setattr(pytester, "runpytest", pytester.runpytest_subprocess)


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", *args)


def summary(result: pytest.RunResult) -> list[str]:
    """The lines of the graphleaf section of the terminal summary."""
    lines = result.outlines
    starts = [i for i, line in enumerate(lines) if line.startswith("=") and " graphleaf " in line]
    assert starts, "no graphleaf section:\n" + "\n".join(lines)
    out = []
    for line in lines[starts[-1] + 1:]:
        if line.startswith("="):
            break
        if line.strip():
            out.append(line)
    return out


def test_the_plugin_is_registered_with_pytest():
    names = {ep.name: ep.value for ep in importlib.metadata.entry_points(group="pytest11")}
    assert names.get("graphleaf") == "flake8_graphleaf.runtime.pytest_plugin"


def test_off_unless_asked(pytester):
    suite(pytester, "leaky")
    result = run(pytester, *LEAKY_TESTS)
    result.assert_outcomes(passed=6)
    assert not any(" graphleaf " in line for line in result.outlines if line.startswith("="))


def test_leaky_suite_names_each_storing_line_and_still_passes(pytester):
    suite(pytester, "leaky")
    result = run(pytester, "--graphleaf", "--graphleaf-leftovers", *LEAKY_TESTS)
    result.assert_outcomes(passed=6)
    lines = summary(result)
    for where, code, path, test in LEAKY:
        hits = [line for line in lines if line.startswith(f"{where}: {code} {path} ") and line.endswith(f"({test})")]
        assert len(hits) == 1, f"{where} {code} {path} ({test}) not once in:\n" + "\n".join(lines)
    findings = [line for line in lines if line[:1].isalpha() and ".py:" in line.split(" ")[0]]
    assert len(findings) == 7, "\n".join(lines)  # the six above and the attention history of test_exact
    # the marked test leaves the same cache, and is not reported
    assert not any("test_ignored.py" in line for line in lines)
    assert "reported, not failed" in lines[-1] or any("reported, not failed" in line for line in lines)


def test_json_report(pytester):
    suite(pytester, "leaky")
    result = run(pytester, "--graphleaf", "--graphleaf-leftovers", "--graphleaf-json=out/graphleaf.json",
                 "test_training.py")
    result.assert_outcomes(passed=4)
    data = json.loads((pytester.path / "out" / "graphleaf.json").read_text())
    assert isinstance(data, list) and len(data) == 5
    for item in data:
        assert {"test", "path", "line", "object", "attribute", "message", "code"} <= set(item)
    by_attribute = {item["attribute"]: item for item in data}
    ema = by_attribute["ema.shadow['weight']"]
    assert (ema["path"], ema["line"], ema["code"]) == ("training.py", 28, "GLF002")
    assert ema["test"] == "test_training.py::test_ema_follows_the_weights"
    assert ema["object"] == "ema (deep-copied at test_training.py:45)"
    assert ema["more"] == 1  # shadow['bias'], stored by the same line
    assert ema["text"] == "self.shadow[name] = self.decay * self.shadow[name] + (1 - self.decay) * p"
    trainer = by_attribute["trainer.stats['loss'][0]"]
    assert trainer["how"] == "stored" and trainer["when"] == "when the copy raised" and trainer["more"] == 2


@pytest.mark.parametrize("ci", [False, True], ids=["local", "ci"])
def test_strict_fails_the_tests_that_leave_a_tensor(pytester, monkeypatch, ci):
    # on CI pytest's short summary prints a failure's whole message: the headline only, there
    if ci:
        monkeypatch.setenv("CI", "true")
    else:
        monkeypatch.delenv("CI", raising=False)
        monkeypatch.delenv("BUILD_NUMBER", raising=False)
    suite(pytester, "leaky")
    result = run(pytester, "--graphleaf", "--graphleaf-strict", "--graphleaf-leftovers", *LEAKY_TESTS)
    result.assert_outcomes(passed=1, failed=5)  # test_ignored.py passes: it is not checked
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([
        "*graphleaf (strict): this test left 2 tensors on the autograd graph where copy.deepcopy*",
        "seq2seq.py:14: GLF001 model.encoder.last_hidden holds a tensor*",
    ])
    # each finding once (in its test's failure, not again in a section or the summary), the summary once
    findings = [line for line in result.outlines if ": GLF0" in line and line.split(":")[0].endswith(".py")]
    assert len(findings) == 7 and len(set(findings)) == 7, "\n".join(result.outlines)
    assert sum(1 for line in result.outlines if line.startswith("=") and " graphleaf " in line) == 1
    assert summary(result) == ["7 tensors on the autograd graph left by 5 tests; all listed with the failures above"]
    assert not any(line.startswith("-") and " graphleaf " in line for line in result.outlines)  # no per-test section


def test_ini_options(pytester):
    suite(pytester, "leaky")
    pytester.makeini("[pytest]\ngraphleaf = true\ngraphleaf_strict = true\ngraphleaf_json = ini.json\n"
                     "graphleaf_leftovers = true\n")
    result = run(pytester, "test_training.py")
    result.assert_outcomes(failed=4)
    assert len(json.loads((pytester.path / "ini.json").read_text())) == 5
    result = run(pytester, "--no-graphleaf", "test_training.py")
    result.assert_outcomes(passed=4)


def test_ini_options_in_pyproject(pytester):
    suite(pytester, "leaky")
    pytester.makepyprojecttoml("[tool.pytest.ini_options]\ngraphleaf = true\ngraphleaf_leftovers = true\n")
    result = run(pytester, "test_exact.py")
    result.assert_outcomes(passed=1)
    assert any(line.startswith("seq2seq.py:14: GLF001") for line in summary(result))


def test_turned_on_in_conftest(pytester):
    suite(pytester, "leaky")
    pytester.makeconftest("def pytest_configure(config):\n    config.option.graphleaf = True\n")
    result = run(pytester, "test_exact.py")
    result.assert_outcomes(passed=1)
    # the model the test built holds it at its end, and no copy met it: a note, not a finding
    assert any(line.startswith("    seq2seq.py:14: model.encoder.last_hidden (1, 2, 16)") for line in summary(result))


def test_what_no_copy_or_send_met_is_a_note_unless_leftovers_are_asked_for(pytester):
    """The end-of-test state is no evidence that the program copies: a tensor held at the end of a test by a
    model it built, or by an object it copied earlier without error, is a note by default (not in the JSON
    file, never a strict failure); ``--graphleaf-leftovers`` makes those findings again.  Run as a user
    runs it, in a pytest process of its own."""
    suite(pytester, "leaky")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly", "--graphleaf",
                                           "--graphleaf-strict", "--graphleaf-json=default.json", "test_training.py")
    result.assert_outcomes(passed=3, failed=1)  # only the test whose copy raised
    (item,) = json.loads((pytester.path / "default.json").read_text())
    assert (item["path"], item["line"], item["when"]) == ("training.py", 17, "when the copy raised")
    lines = summary(result)
    assert lines[0] == "1 tensor on the autograd graph left by 1 test; all listed with the failures above"
    lines = lines[1:]
    assert lines[0].startswith("note: 4 tensors on the autograd graph held at the end of 3 tests by objects that "
                               "no copy or send of the test met then (not findings:"), "\n".join(lines)
    assert lines[1:5] == [
        "    seq2seq.py:14: model.encoder.last_hidden (1, 8, 16) grad_fn=StackBackward0, stored here "
        "(test_training.py::test_seq2seq_step_lowers_the_loss)",
        "    seq2seq.py:26: model.attend.history[0] (8, 6) grad_fn=SoftmaxBackward0, stored here "
        "(test_training.py::test_seq2seq_step_lowers_the_loss)",
        "    training.py:28: ema.shadow['weight'] (2, 4) grad_fn=AddBackward0, stored here "
        "(test_training.py::test_ema_follows_the_weights)",
        "    training.py:35: model.metrics['train/loss'] () grad_fn=MeanBackward0, stored here "
        "(test_training.py::test_metrics_are_logged)",
    ]
    assert not any(": GLF0" in line for line in lines[:5])
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly", "--graphleaf",
                                           "--graphleaf-strict", "--graphleaf-leftovers",
                                           "--graphleaf-json=leftovers.json", "test_training.py")
    result.assert_outcomes(failed=4)
    data = json.loads((pytester.path / "leftovers.json").read_text())
    assert sorted((f["path"], f["line"]) for f in data) == [
        ("seq2seq.py", 14), ("seq2seq.py", 26), ("training.py", 17), ("training.py", 28), ("training.py", 35)]
    assert not any(line.startswith("note:") for line in summary(result))


def test_the_marker_is_registered(pytester):
    suite(pytester, "leaky")
    result = run(pytester, "--strict-markers", "--graphleaf", "test_ignored.py")
    result.assert_outcomes(passed=1)
    assert summary(result)[-1].startswith("no test left a tensor")
    result = run(pytester, "--markers")
    result.stdout.fnmatch_lines(["@pytest.mark.graphleaf_ignore: *"])


def test_clean_twins_report_nothing(pytester):
    suite(pytester, "clean")
    result = run(pytester, "--graphleaf", "--graphleaf-strict", "--graphleaf-json=clean.json")
    result.assert_outcomes(passed=6)
    assert summary(result)[0] == ("no test left a tensor on the autograd graph where copy.deepcopy or a process "
                                  "boundary meets it")
    assert json.loads((pytester.path / "clean.json").read_text()) == []


def test_a_failing_copy_gets_its_explanation_in_the_report(pytester):
    suite(pytester, "leaky")
    result = run(pytester, "--graphleaf", "test_checkpoint.py")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*graphleaf: why it failed*",
        "copy.deepcopy raised the graph-leaf error at test_checkpoint.py:13",
        "*best = copy.deepcopy(model)*",
        "model.encoder.last_hidden  (1, 4, 16) float32 cpu grad_fn=StackBackward0",
        "    <- seq2seq.py:14 GLF001 (traced) self.last_hidden = h  # for the attention plots",
    ])
    suite(pytester, "clean")
    run(pytester, "--graphleaf", "test_checkpoint.py").assert_outcomes(passed=1)


def test_the_plugin_does_not_change_what_tests_compute(pytester):
    suite(pytester, "leaky")
    plain = run(pytester, "-s", "test_exact.py")
    checked = run(pytester, "-s", "--graphleaf", "test_exact.py")
    plain.assert_outcomes(passed=1)
    checked.assert_outcomes(passed=1)  # the test asserts the graph tensors are still there
    sums = [[line for line in r.outlines if "checksum" in line] for r in (plain, checked)]
    assert sums[0] and sums[0] == sums[1]


def test_dataloader_workers_and_queues(pytester):
    """Objects sent to other processes: a dataset of tensors that require grad given to workers, a graph
    tensor put on a multiprocessing queue (the test swallows the worker's error, as a smoke test would)."""
    pytester.makepyfile(
        data="""
        import torch
        from torch.utils.data import Dataset

        class Augmented(Dataset):
            def __init__(self, n=8):
                self.noise = torch.randn(n, 3, requires_grad=True)  # learnt earlier, still a parameter
                self.labels = torch.arange(n)

            def __len__(self):
                return len(self.labels)

            def __getitem__(self, i):
                return self.noise[i], self.labels[i]
        """,
        test_send="""
        import multiprocessing
        import torch
        from torch.utils.data import DataLoader
        from data import Augmented

        def test_one_epoch_smoke():
            loader = DataLoader(Augmented(), batch_size=4, num_workers=1)
            try:
                batches = list(loader)
            except RuntimeError:
                batches = []
            assert isinstance(batches, list)

        def test_queue():
            queue = multiprocessing.get_context("spawn").Queue()
            out = torch.nn.Linear(3, 2)(torch.randn(4, 3))
            queue.put(out)
            queue.cancel_join_thread()
        """,
    )
    result = run(pytester, "--graphleaf", "--graphleaf-json=send.json")
    result.assert_outcomes(passed=2)
    data = {item["test"]: item for item in json.loads((pytester.path / "send.json").read_text())}
    loader = data["test_send.py::test_one_epoch_smoke"]
    assert (loader["path"], loader["line"], loader["code"]) == ("data.py", 6, "GLF301")
    assert loader["attribute"] == "dataset.noise" and "indexed by 1 DataLoader worker" in loader["object"]
    queue = data["test_send.py::test_queue"]
    assert (queue["path"], queue["line"], queue["code"]) == ("test_send.py", 17, "GLF301")
    assert queue["object"].startswith("out (put on a multiprocessing queue at test_send.py:17)")


def test_a_child_that_cannot_send_its_result_does_not_hang_the_test(pytester):
    """Without the plugin this test waits forever in queue.get(): the child's result is on the graph."""
    suite(pytester, "leaky")
    shutil.copy(os.path.join(ROOT, "fixtures", "incidents", "worker_result_put.py"), str(pytester.path))
    pytester.makepyfile(test_worker="""
        import multiprocessing

        import pytest
        from worker_result_put import work

        def test_worker_result():
            queue = multiprocessing.get_context("fork").Queue()
            worker = multiprocessing.get_context("fork").Process(target=work, args=(queue,))
            worker.start()
            with pytest.raises(RuntimeError, match="Cowardly refusing to serialize non-leaf tensor"):
                queue.get()
            worker.join()
    """)
    result = run(pytester, "--graphleaf", "--graphleaf-json=worker.json", "test_worker.py")
    result.assert_outcomes(passed=1)
    (item,) = json.loads((pytester.path / "worker.json").read_text())
    assert (item["path"], item["line"], item["code"], item["how"]) == ("worker_result_put.py", 10, "GLF301", "sent")
    assert item["text"] == "queue.put(model(torch.randn(4, 3)))  # the result, still on the graph"


# One case per kind of root (fixtures/pytest/roots, each test swallowing its error): the line reported is
# the root -- the user's line that applied a legacy norm or pruning (through the project's helpers), the
# line that wrote into a tensor in place, an object's own copy method as well as the store, the
# dataset's line that makes or keeps what DataLoader workers cannot batch, the store whose tensor is
# still there (not an earlier one replaced since).  fixtures/pytest/roots/ROOTS.json: {test: [[path, line, code]]}
with open(os.path.join(FIXTURES, "roots", "ROOTS.json"), encoding="utf-8") as _fh:
    ROOTS = {(test, path, line, code) for test, places in json.load(_fh).items() if test != "_"
             for path, line, code in places}


def test_each_kind_of_root_is_named_at_its_root_line(pytester):
    suite(pytester, "roots")
    result = run(pytester, "--graphleaf", "--graphleaf-json=roots.json", "-W", "ignore::FutureWarning")
    result.assert_outcomes(passed=18)
    data = json.loads((pytester.path / "roots.json").read_text())
    got = {(f["test"].split("::")[1], f["path"], f["line"], f["code"]) for f in data}
    assert got == ROOTS, "\n".join(f"{f['path']}:{f['line']}: {f['code']} {f['message']}" for f in data)
    assert not any("typing_extensions" in line or "site-packages" in line for line in result.outlines)
    by_line = {(f["path"], f["line"]): f for f in data}
    assert by_line[("copymethods.py", 16)]["message"].endswith("Tracker.__deepcopy__() copies it here")
    assert by_line[("copymethods.py", 25)]["message"].endswith("Scaled.__getstate__() copies it here")
    assert by_line[("norms.py", 8)]["text"] == "return weight_norm(layer)  # the legacy weight norm, applied here"
    assert {by_line[("norms.py", n)]["how"] for n in (8, 12, 20)} == {"applied"}
    assert "applied here (the hook torch registered for it stores the tensor at every forward)" in \
        by_line[("norms.py", 20)]["message"]
    assert by_line[("inplace.py", 18)]["how"] == "stored" and by_line[("copymethods.py", 16)]["how"] == "method"
    assert "Encoded.__getitem__ returns cannot be batched" in by_line[("data.py", 18)]["message"]
    # kept by code that records nothing: a cached_property, state_dict(), a comprehension, a pool's tasks
    assert by_line[("made.py", 16)]["how"] == "made" and by_line[("made.py", 38)]["how"] == "made"
    assert by_line[("made.py", 33)]["how"] == "stored" and by_line[("made.py", 27)]["how"] == "stored"
    assert by_line[("made.py", 42)]["how"] == "argument" and by_line[("made.py", 43)]["how"] == "built"
    assert "sent to a multiprocessing Pool at test_roots.py:" in by_line[("made.py", 38)]["message"]
    # roots above the store, on the stack when it ran, or the line that copied or sent the tensor
    assert [by_line[("callers.py", n)]["how"] for n in (26, 33, 49, 60, 80, 94)] == \
        ["forward", "forward", "passed", "copied", "sent", "made"]
    assert "the forward that stored it ran here with grad on (Head in eval mode), and no backward went through " \
        "what it stored" in by_line[("callers.py", 26)]["message"]
    assert "(while building Probed)" in by_line[("callers.py", 33)]["message"]
    assert by_line[("callers.py", 49)]["message"].endswith("given here to the constructor that stores it")
    assert "given to a spawn Process at callers.py:80" in by_line[("callers.py", 80)]["message"]
    assert "made here by the dataset's module 'embedding' (its parameters require grad)" in \
        by_line[("callers.py", 94)]["message"]


def test_a_forward_whose_graph_is_trained_or_wanted_is_not_named(pytester):
    """The eval-mode forward of callers.Head is named beside its store only when nothing trains its graph: after
    a backward through what it stored (fine-tuning in eval mode), or with an input that requires grad (a
    saliency map), only the store is named."""
    shutil.copy(os.path.join(FIXTURES, "roots", "callers.py"), str(pytester.path))
    pytester.makepyfile(test_eval="""
        import copy

        import torch

        import callers

        def test_eval_mode_fine_tuning():
            model = callers.Head()
            model.eval()
            model(torch.randn(2, 4)).sum().backward()
            try:
                copy.deepcopy(model)
            except RuntimeError:
                pass

        def test_saliency():
            model = callers.Head()
            callers.output_shape(model, torch.randn(2, 4, requires_grad=True))
            try:
                copy.deepcopy(model)
            except RuntimeError:
                pass
        """)
    result = run(pytester, "--graphleaf", "--graphleaf-json=eval.json")
    result.assert_outcomes(passed=2)
    got = sorted((f["test"].split("::")[1], f["path"], f["line"], f["how"])
                 for f in json.loads((pytester.path / "eval.json").read_text()))
    assert got == [("test_eval_mode_fine_tuning", "callers.py", 20, "stored"),
                   ("test_saliency", "callers.py", 20, "stored")], got


def test_clean_sends_and_copies_are_not_reported(pytester):
    """The twins: parametrizations instead of the legacy norms, detached in-place writes, stores and copy methods, a
    dataset holding an encoder whose items are computed under no_grad (the workers batch plain tensors), and
    a dataset of graph tensors whose forked workers send detached items (the dataset is never pickled)."""
    suite(pytester, "roots_clean")
    result = run(pytester, "--graphleaf", "--graphleaf-strict", "--graphleaf-json=clean.json")
    result.assert_outcomes(passed=18)
    assert json.loads((pytester.path / "clean.json").read_text()) == []


THIRD_PARTY = {
    "site-packages/helperlib/__init__.py": '''\
import torch


def remember_output(model, x):
    model.last = model(x)  # a store made by the installed package's own code
    return model.last


def apply_weight_norm(layer):
    return torch.nn.utils.weight_norm(layer)  # the legacy norm, applied by the package for the user
''',
    "conftest.py": '''\
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "site-packages"))
''',
    "test_lib.py": '''\
import copy

import torch

import helperlib


def test_output_kept_by_a_library_helper():
    model = torch.nn.Linear(3, 2)
    helperlib.remember_output(model, torch.randn(4, 3))  # the user's root line
    assert model.last.shape == (4, 2)


def test_norm_applied_by_a_library_helper():
    layer = helperlib.apply_weight_norm(torch.nn.Linear(3, 2))  # the user's root line
    layer(torch.randn(1, 3))
    try:
        copy.deepcopy(layer)
    except RuntimeError:
        pass
''',
}


def test_a_store_inside_an_installed_package_is_named_at_the_users_line(pytester):
    """A tensor stored by an installed package's code (a folder on sys.path named site-packages) is named at
    the user's line that called the package, never at the package's own line: the user cannot change that
    line, and it says nothing about their code.  Both kinds: a plain store on a module, and a legacy
    weight_norm whose hook torch registered, applied through the package."""
    for rel, text in THIRD_PARTY.items():
        (pytester.path / rel).parent.mkdir(parents=True, exist_ok=True)
        (pytester.path / rel).write_text(text)
    result = run(pytester, "--graphleaf", "--graphleaf-leftovers", "--graphleaf-json=lib.json", "-W",
                 "ignore::FutureWarning")  # the first test copies nothing: what it leaves is reported as asked
    result.assert_outcomes(passed=2)
    data = json.loads((pytester.path / "lib.json").read_text())
    got = {(f["test"].split("::")[1], f["path"], f["line"], f["how"]) for f in data}
    assert got == {
        ("test_output_kept_by_a_library_helper", "test_lib.py", 10, "stored"),
        ("test_norm_applied_by_a_library_helper", "test_lib.py", 15, "applied"),
    }, "\n".join(f"{f['path']}:{f['line']}: {f['code']} {f['how']} {f['message']}" for f in data)
    assert not any("site-packages" in line or "helperlib" in line for line in summary(result))
