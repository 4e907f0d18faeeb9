"""A constructor flag given through a factory's ``**kwargs`` dict (fixtures/projects/kwargs_flags,
stable-baselines3's ``make_proba_distribution`` shape), judged with torch: the distribution
detaches what it keeps unless ``learn_features``, which every construction the project makes
leaves False, so only the Gaussian's kept mean is reported (TRUE: the copy raises with
``use_sde=False``); with the flag set to True in the policy's dict, the kept latent is reported
too, and the copy with ``use_sde=True`` raises."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from _imported import deepcopy_works, imported

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "projects" / "kwargs_flags"


def _attributes(cwd: Path) -> list[str]:
    r = subprocess.run([sys.executable, "-m", "flake8_graphleaf", "check", "--isolated", "--no-cache",
                        "--output-format", "concise", "."], capture_output=True, text=True, timeout=300, cwd=cwd)
    assert "Traceback" not in r.stderr, r.stderr
    return sorted(line.split("'")[1] for line in r.stdout.splitlines() if ": GLF" in line)


def _copies(cwd: Path, use_sde: bool) -> bool:
    torch = pytest.importorskip("torch")
    with imported(cwd, "sb.policies") as policies:
        policy = policies.ActorCriticPolicy(3, 2, use_sde=use_sde)
        policy(torch.randn(4, 3)).sum().backward()
        return deepcopy_works(policy)


def _project(tmp_path: Path, learn_features: bool) -> Path:
    shutil.copytree(FIXTURE, tmp_path / "p")
    policies = tmp_path / "p" / "sb" / "policies.py"
    text = policies.read_text()
    assert '"learn_features": False' in text
    policies.write_text(text.replace('"learn_features": False', f'"learn_features": {learn_features}'))
    return tmp_path / "p"


def test_a_flag_every_construction_leaves_off_through_kwargs(tmp_path):
    cwd = _project(tmp_path, False)
    assert _attributes(cwd) == ["self.action_dist.mean"]
    assert _copies(cwd, use_sde=True)  # the latent is kept detached
    assert not _copies(cwd, use_sde=False)  # the Gaussian's mean is kept with its graph


def test_the_flag_set_in_the_dict_is_reported(tmp_path):
    cwd = _project(tmp_path, True)
    assert _attributes(cwd) == ["self.action_dist._latent_sde", "self.action_dist.mean"]
    assert not _copies(cwd, use_sde=True)
