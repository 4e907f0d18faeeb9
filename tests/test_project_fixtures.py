"""The whole-program fixture (fixtures/projects/wholeprogram): flake8 and graphleaf check report
exactly the marked lines across files, and running the code agrees with every marker."""

from __future__ import annotations

import copy
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PROJECT = ROOT / "fixtures" / "projects" / "wholeprogram"
EXPECT = re.compile(r"#\s*expect:\s*(GLF\d+)(\?)?")  # GLF001?: a step taken on trust (reported at --confidence low)
LINE = re.compile(r"^(?P<path>.+?):(?P<line>\d+):\d+: (?P<code>GLF\d+) ")


def marked(project: Path = PROJECT, level: str = "high") -> set[tuple[str, int, str]]:
    """The marked findings the default selection (``high``) reports, or every level (``low``)."""
    out = set()
    for path in sorted(project.rglob("*.py")):
        for i, text in enumerate(path.read_text().splitlines(), start=1):
            m = EXPECT.search(text)
            if m and (level == "low" or not m.group(2)):
                out.add((path.relative_to(project).as_posix(), i, m.group(1)))
    return out


def parse(stdout: str, project: Path = PROJECT) -> set[tuple[str, int, str]]:
    out = set()
    for line in stdout.splitlines():
        m = LINE.match(line)
        if m:
            rel = Path(m.group("path")).resolve().relative_to(project).as_posix()
            out.add((rel, int(m.group("line")), m.group("code")))
    return out


def test_flake8_reports_exactly_the_marked_lines():
    r = subprocess.run([sys.executable, "-m", "flake8", "--isolated", "--select=GLF", str(PROJECT)],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert parse(r.stdout) == marked(), r.stdout + r.stderr


def test_graphleaf_check_reports_exactly_the_marked_lines():
    r = subprocess.run([sys.executable, "-m", "flake8_graphleaf", "check", "--isolated", "--output-format", "concise",
                        str(PROJECT)], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 1, r.stderr
    assert parse(r.stdout) == marked(), r.stdout + r.stderr
    r = subprocess.run([sys.executable, "-m", "flake8_graphleaf", "check", "--isolated", "--output-format", "concise",
                        "--confidence", "low", str(PROJECT)], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert parse(r.stdout) == marked(level="low"), r.stdout + r.stderr


def test_stores_taken_on_trust_come_with_the_lower_levels():
    base = [sys.executable, "-m", "flake8_graphleaf", "check", "--isolated", "--output-format", "concise"]
    r = subprocess.run(base + ["--argument-stores", str(PROJECT / "shop" / "layers.py")],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    got = parse(r.stdout)
    assert ("shop/layers.py", 83, "GLF004") in got, r.stdout
    assert "[medium confidence: taken on trust: argument 'x' is taken to be an activation" in r.stdout
    r = subprocess.run([sys.executable, "-m", "flake8", "--isolated", "--select=GLF", "--graphleaf-argument-stores",
                        str(PROJECT / "shop" / "layers.py")], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert ("shop/layers.py", 83, "GLF004") in parse(r.stdout), r.stdout


# --- the markers agree with what the code does -------------------------------------------


@pytest.fixture(scope="module")
def shop():
    torch = pytest.importorskip("torch")
    sys.path.insert(0, str(PROJECT))
    try:
        import shop.layers
        import shop.probe
        import shop.decode
        import shop.policy
        import shop.asr
        import shop.encoders
        import shop.streaming
        import shop.transforms
        import shop.parallel
        import shop.rgcn
        import shop.queue_loss
        import shop.forecaster
        import shop.snapshots
        import shop.loop
        yield torch, shop
    finally:
        sys.path.remove(str(PROJECT))
        for name in [m for m in sys.modules if m == "shop" or m.startswith("shop.")]:
            del sys.modules[name]


def raises_on_deepcopy(obj) -> bool:
    try:
        copy.deepcopy(obj)
    except RuntimeError as exc:
        assert "graph leaves" in str(exc)
        return True
    return False


def has_grad_fn(value) -> bool:
    return getattr(value, "grad_fn", None) is not None


def test_positives_raise_and_negatives_do_not(shop):
    torch, pkg = shop
    layers, probe = pkg.layers, pkg.probe
    x = torch.randn(4, 8)

    p = probe.Probe()
    p(x).sum().backward()
    assert raises_on_deepcopy(p)

    head = layers.Head(8, 4)
    head(torch.randn(2, 8), [2, 1], torch.tensor([0, 1]))
    assert has_grad_fn(head.logits_cache) and has_grad_fn(head.heads)
    assert not has_grad_fn(head.mask) and isinstance(head.acc, float)
    assert not has_grad_fn(head.constant) and head.n_heads == 2

    gp = layers.GradientPenalty(8)
    gp(torch.randn(4, 8))
    assert has_grad_fn(gp.penalty_grad) and not has_grad_fn(gp.plain_grad)

    ann = layers.Annotated(8)
    ann(x, torch.tensor([True, False, True, True]), torch.device("cpu"))
    assert not raises_on_deepcopy(ann)

    net = layers.stylizer(torch.randn(1, 3, 4, 4))
    net(torch.randn(1, 3, 4, 4)).sum().backward()
    assert has_grad_fn(net.content.loss) and raises_on_deepcopy(net)

    stats = layers.InputStats()
    stats(torch.randn(4, 8))  # the model's input data: no history
    assert not raises_on_deepcopy(stats)

    cached = layers.Cached(8)
    cached(x)
    assert has_grad_fn(cached.cache) and not raises_on_deepcopy(cached)

    bb = layers.Backbone(8)
    bb(x)
    assert has_grad_fn(bb.extra["layer1"]) and raises_on_deepcopy(bb)

    out = pkg.decode.decode(layers.Block(8), x)
    assert not has_grad_fn(out)

    cleared = layers.ClearedCache(8)
    cleared(x).backward()
    assert cleared.cache is None and cleared.feats == [] and not raises_on_deepcopy(cleared)

    kept = layers.KeptCache(8)
    kept(x).backward()
    assert raises_on_deepcopy(kept)


def test_helper_objects_held_by_a_module(shop):
    """A non-module object the policy holds (built by a factory in another file) keeps the
    distribution of the policy's logits: deepcopy of the policy raises; the twin that detaches,
    and a shape kept on the helper, do not."""
    torch, pkg = shop
    obs, actions = torch.randn(4, 3), torch.tensor([0, 1, 0, 1])
    policy = pkg.policy.Policy(3, 2)
    policy(obs, actions).sum().backward()
    assert has_grad_fn(policy.action_dist.distribution.logits)
    assert policy.action_dist.last_shape == (4, 2) and raises_on_deepcopy(policy)
    twin = pkg.policy.DetachedPolicy(3, 2)
    twin(obs, actions).sum().backward()
    assert not has_grad_fn(twin.action_dist.distribution.logits) and not raises_on_deepcopy(twin)


def test_what_a_submodule_of_another_file_returns_element_by_element(shop):
    """The decoder (another file, made by a factory) returns (loss, float accuracy, size): the
    model that keeps the loss cannot be copied, the one that keeps only the accuracy can."""
    torch, pkg = shop
    xs, ys = torch.randn(4, 8), torch.tensor([0, 1, 2, 1])
    asr = pkg.asr.ASR(8, 3)
    asr(xs, ys).backward()
    assert has_grad_fn(asr.loss) and isinstance(asr.acc, float) and asr.batch == 4
    assert raises_on_deepcopy(asr)
    scored = pkg.asr.ScoredASR(8, 3)
    scored(xs, ys).backward()
    assert isinstance(scored.acc, float) and isinstance(scored.agree, float) and not raises_on_deepcopy(scored)
    scaled = pkg.asr.ScaledASR(8, 3)
    scaled(xs, ys).backward()
    assert has_grad_fn(scaled.scaled) and raises_on_deepcopy(scaled)


def test_call_sites_in_another_file_decide_an_argument(shop):
    """norms.py's two classes look alike; encoders.py calls one with its layer's output (an
    activation: the buffer gets history) and the other with the raw input (data: it does not)."""
    torch, pkg = shop
    enc = pkg.encoders.Encoder(8)
    enc(torch.randn(4, 8)).sum().backward()
    assert has_grad_fn(enc.norm.running_mean) and raises_on_deepcopy(enc.norm)
    assert not has_grad_fn(enc.stats.running_mean) and not raises_on_deepcopy(enc.stats)


def test_models_given_through_a_base_of_another_file(shop):
    """StreamingSearch's scorers are given (its base keeps them, search.py) and its window
    wraps them: called with data, what it keeps is a leaf and the search copies; the twin that
    feeds its own layer keeps an activation when a model calls it with one."""
    torch, pkg = shop
    streaming = pkg.streaming
    search = streaming.StreamingSearch({"lm": torch.nn.Linear(8, 3)})
    search(torch.randn(2, 8))
    search(torch.randn(2, 8))
    assert search.buffer.shape == (4, 8) and not raises_on_deepcopy(search)
    rescoring = streaming.RescoringSearch({}, 8)
    encoder = torch.nn.Linear(8, 8)
    rescoring(encoder(torch.randn(2, 8)))
    assert has_grad_fn(rescoring.buffer) and raises_on_deepcopy(rescoring)


def test_a_base_forward_decides_what_super_forward_feeds(shop):
    """super().forward(Y) runs the base's forward on the same object: the standardizers learn
    statistics of the targets they are given (data: nothing gets history), the twin's base
    feeds Y to a layer, and a model that calls it with an activation gets a buffer with history."""
    torch, pkg = shop
    t = pkg.transforms
    Y, strata = torch.randn(6, 2), torch.tensor([0, 1, 0, 1, 1, 0])
    for cls in (t.Standardize, t.StratifiedStandardize):
        std = cls(2, 2)
        std(Y, strata)
        assert not has_grad_fn(std.means) and not raises_on_deepcopy(std)
    proj = t.RunningProjected(2)
    proj(torch.nn.Linear(2, 2)(Y)).sum().backward()
    assert has_grad_fn(proj.last_mean) and raises_on_deepcopy(proj)


def test_a_data_parallel_subclass_wraps_a_given_module(shop):
    """DataParallel keeps the module it is given and scatters with its own method: the caching
    subclass called with data copies; the twin that projects first keeps an activation."""
    torch, pkg = shop
    par = pkg.parallel
    x = torch.randn(3, 4)
    cached = par.CachedParallel(torch.nn.Linear(4, 2))
    cached(x).sum().backward()
    cached(x)
    assert cached._cached is x and not raises_on_deepcopy(cached)
    projected = par.ProjectedParallel(torch.nn.Linear(4, 2), 4)
    projected(torch.nn.Linear(4, 4)(x)).sum().backward()
    assert has_grad_fn(projected._cached) and raises_on_deepcopy(projected)


def test_a_forward_inherited_from_another_file_runs_the_subclass_methods(shop):
    """Representation.forward (representation.py) calls _plain_forward, which only the
    subclasses define: the cache one keeps is an activation, the twin's has no history."""
    torch, pkg = shop
    gcn = pkg.rgcn.CachedGCN(5, 4)
    gcn(torch.tensor([0, 2])).sum().backward()
    assert has_grad_fn(gcn.enriched) and raises_on_deepcopy(gcn)
    gcn.post_parameter_update()
    assert not raises_on_deepcopy(gcn)
    twin = pkg.rgcn.EvalCachedGCN(5, 4)
    twin().sum().backward()
    assert not has_grad_fn(twin.enriched) and not raises_on_deepcopy(twin)


def test_a_submodule_result_element_carries_only_what_its_arguments_bring(shop):
    """QueueLoss returns (loss, the queue it was given, a bool): the trainer's kept queue and
    flag copy, the kept loss does not."""
    torch, pkg = shop
    trainer = pkg.queue_loss.Trainer(3)
    trainer(torch.randn(2, 3)).backward()
    assert not has_grad_fn(trainer.queue) and trainer.use_the_queue is True
    assert has_grad_fn(trainer.last_loss) and raises_on_deepcopy(trainer)
    trainer.last_loss = None
    assert not raises_on_deepcopy(trainer)


def test_a_switch_every_constructor_turns_off_keeps_nothing(shop):
    """attention.py's store_attn: Forecaster (another file) builds the layers with False through
    AttentionEncoder, so nothing is kept; Inspector builds KeepingLayer with True, so it is."""
    torch, pkg = shop
    model = pkg.forecaster.Forecaster(3)
    model(torch.randn(2, 3)).sum().backward()
    assert not hasattr(model.encoder.layer, "attn") and not raises_on_deepcopy(model)
    inspector = pkg.forecaster.Inspector(3)
    inspector(torch.randn(2, 3)).sum().backward()
    assert has_grad_fn(inspector.layer.attn) and raises_on_deepcopy(inspector)


def test_a_copy_of_a_class_of_another_file_is_reported_at_the_copy(shop):
    """snapshots.py copies a TiedScale (frozen.py keeps a non-leaf tensor from construction):
    GLF202 at the copy names frozen.py's line; the copy of the attention encoder is clean."""
    torch, pkg = shop
    with pytest.raises(RuntimeError, match="graph leaves"):
        pkg.snapshots.snapshot_scale(3)
    pkg.snapshots.snapshot_encoder(3)
    r = subprocess.run([sys.executable, "-m", "flake8_graphleaf", "check", "--isolated", "--output-format", "concise",
                        "--select", "GLF202", str(PROJECT)], capture_output=True, text=True, cwd=ROOT, timeout=300)
    (line,) = [x for x in r.stdout.splitlines() if "GLF202" in x]
    assert "snapshots.py:16:" in line and "GLF005 at " in line and "frozen.py:11" in line, line


def test_a_function_given_the_model_keeps_a_graph_tensor_on_it(shop):
    """loop.py: train_step (an nn.Module annotation) and logged_step (every call passes a
    module) keep graph tensors on the model; clean_step keeps detached ones."""
    torch, pkg = shop
    model = pkg.attention.AttentionEncoder(3)
    pkg.loop.train_step(model, torch.randn(2, 3)).backward()
    assert has_grad_fn(model.last_output) and raises_on_deepcopy(model)
    assert raises_on_deepcopy(pkg.loop.run(3))
    model = pkg.attention.AttentionEncoder(3)
    pkg.loop.clean_step(model, torch.randn(2, 3)).backward()
    assert not has_grad_fn(model.last_output) and not has_grad_fn(model.last_norm) and not raises_on_deepcopy(model)


def test_the_index_never_reads_a_virtual_environment(tmp_path):
    """A virtual environment inside the project (any folder name) is not project code: the
    index does not list its files, so its classes never answer cross-file questions."""
    from flake8_graphleaf.project.index import python_files

    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "model.py").write_text("x = 1\n")
    env = tmp_path / "tools_env"
    (env / "lib").mkdir(parents=True)
    (env / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (env / "lib" / "layer.py").write_text("y = 2\n")
    assert [Path(p).relative_to(tmp_path).as_posix() for p in python_files([str(tmp_path)])] == ["pkg/model.py"]


def test_a_helper_object_finding_is_fixed_in_the_helpers_file_only_when_it_is_checked():
    """The tensor is kept by the helper's class, in another file: checking policy.py alone,
    `graphleaf fix` changes nothing and says where the fix goes; checking both files, the
    copy-safe state goes into dists.py and policy.py's finding counts as fixed."""
    r = subprocess.run([sys.executable, "-m", "flake8_graphleaf", "fix", "--isolated", "--no-cache", "--diff",
                        "--unsafe-fixes", str(PROJECT / "shop" / "policy.py")],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert "Traceback" not in r.stderr and r.stdout == ""
    assert ("no automatic fix: the tensor is kept by shop.dists.CategoricalDist (line 14), a class of dists.py: "
            "its fix is made in that file (when it is checked too)") in r.stderr
    both = subprocess.run([sys.executable, "-m", "flake8_graphleaf", "fix", "--isolated", "--no-cache", "--diff",
                           str(PROJECT / "shop" / "policy.py"), str(PROJECT / "shop" / "dists.py")],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert "Traceback" not in both.stderr
    assert "shop/dists.py" in both.stdout and "+    def __getstate__(self):" in both.stdout, both.stdout
    assert "+++ b/" + str((PROJECT / "shop" / "policy.py").relative_to(ROOT)) not in both.stdout  # policy.py unchanged
    assert "GLF001 fixed: add CategoricalDist.__getstate__ in dists.py" in both.stderr, both.stderr
