"""Property tests: on generated programs, ``check`` and ``fix`` never raise and every fixed
output parses (and a second fix changes nothing).  Run in process for speed, through the
same per-file functions the command uses; bounded so the suite stays fast."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from flake8_graphleaf.cli.check import check_one  # noqa: E402
from flake8_graphleaf.cli.fixing import fix_one  # noqa: E402
from flake8_graphleaf.cli.config import Settings  # noqa: E402

pytestmark = pytest.mark.slow  # end to end: run by `python -m pytest -m slow` and .ci/run

SETTINGS = Settings(root=Path.cwd())
BOUNDED = settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))


def _check_and_fix(source: str, tmp: Path) -> None:
    raw = source.encode("utf-8")
    report = check_one("gen.py", SETTINGS, raw=raw)
    assert report.error is None or "\n" not in report.error
    for unsafe in (False, True):
        fixed = fix_one("gen.py", SETTINGS, unsafe, True, raw=raw)
        assert fixed.error is None or "\n" not in fixed.error
        out = fixed.output
        if fixed.changed:
            ast.parse(out)
            again = fix_one("gen.py", SETTINGS, unsafe, True, raw=out.encode("utf-8"))
            assert not again.changed, (source, out, again.output)


# ------------------------------------------------------------ hypothesmith programs


hypothesmith = pytest.importorskip("hypothesmith")


@BOUNDED
@given(hypothesmith.from_node())
def test_generated_programs(tmp_path_factory, source):
    _check_and_fix(source, tmp_path_factory.getbasetemp())


# ------------------------------------------------------------ GLF patterns and look-alikes

NAMES = st.sampled_from(["out", "features", "cache", "loss", "h", "stats", "x_prev", "best"])

STATEMENTS = [
    "self.{n} = self.fc(x)",
    "self.{n} = self.fc(x).detach()",
    "self.{n} = []",
    "self.{n}.append(self.fc(x))",
    "self.{n}.append(self.fc(x).detach())",
    "self.{n}[0] = self.fc(x)",
    "self.{n} = x.mean()",
    "self.{n} = self.fc(x).item()",
    "self.{n}.mul_(0.9).add_(self.fc(x))",
    "with torch.no_grad():\n            self.{n}.mul_(0.9).add_(x.mean(0))",
    "if self.training:\n            self.{n} = self.fc(x)",
    "{n} = self.fc(x)",
    "out, (self.{n}, self.c) = self.lstm(x)",
    "self.{n} = copy.deepcopy(self.fc(x))",
    "self.{n} = self.fc(x)  # noqa: GLF001",
    "self.{n} = self.fc(x)  # noqa",
    "return self.{n}",
    "x = self.{n}",
    "x = self.fc(x)",
]

INIT = [
    "self.fc = nn.Linear(4, 4)",
    "self.lstm = nn.LSTM(4, 4)",
    "self.conv = weight_norm(nn.Conv1d(4, 4, 3))",
    "self.post = nn.utils.spectral_norm(nn.Conv1d(4, 4, 1))",
    "self.register_buffer('stats', torch.zeros(4))",
    "self.w = self.fc.weight * 2",
    "self.features = []",
]

TAIL = [
    "model = M()\nema = copy.deepcopy(model)",
    "swa = AveragedModel(M())",
    "logits = M()(torch.rand(2, 4))\nbest = copy.deepcopy(logits)",
    "def f(m):\n    return copy.deepcopy(m)",
    "",
]

HEADER = (
    "import copy\nimport torch\nimport torch.nn as nn\n"
    "from torch.nn.utils import weight_norm\nfrom torch.optim.swa_utils import AveragedModel\n\n\n"
)


@st.composite
def glf_modules(draw):
    init = draw(st.lists(st.sampled_from(INIT), min_size=1, max_size=4))
    body = [draw(st.sampled_from(STATEMENTS)).format(n=draw(NAMES))
            for _ in range(draw(st.integers(1, 6)))]
    base = draw(st.sampled_from(["nn.Module", "torch.nn.Module", "object", "M0"]))
    extra = draw(st.sampled_from(["", "\n    def other(self):\n        return self.out\n",
                                  "\n    def reset(self):\n        self.cache = None\n"]))
    tail = draw(st.sampled_from(TAIL))
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    src = HEADER + "class M0(nn.Module):\n    pass\n\n\n"
    src += f"class M({base}):\n    def __init__(self):\n        super().__init__()\n"
    src += "".join(f"        {line}\n" for line in init)
    src += "\n    def forward(self, x):\n"
    src += "".join(f"        {line}\n" for line in body)
    src += "        return x\n" + extra + "\n\n" + tail + "\n"
    return src.replace("\n", newline)


@BOUNDED
@given(glf_modules())
def test_generated_glf_modules(tmp_path_factory, source):
    _check_and_fix(source, tmp_path_factory.getbasetemp())


@BOUNDED
@given(st.binary(max_size=300))
def test_arbitrary_bytes_never_raise(data):
    report = check_one("gen.py", SETTINGS, raw=data)
    assert report.error is None or "\n" not in report.error
    fix_one("gen.py", SETTINGS, True, True, raw=data)
