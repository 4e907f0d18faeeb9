"""What the run knows of an object decides, as ``graphleaf check`` and flake8 report it:

- a submodule whose parameters the class turns off (``for p in self.backbone.parameters():
  p.requires_grad = False``, ``self.backbone.requires_grad_(False)``) is no grad source: a
  DataLoader whose workers run a ``__getitem__`` through it is clean, and the same dataset with a
  trainable embedding is reported (the workers cannot send its item back);
- a copy of a module the run made and copies before any forward with grad on is judged clean by
  the run (the class's store in forward stays a finding of its own, and no longer names that
  copy); handed first to code the run does not follow (a library's ``fit(net)``), the copy is
  reported as before.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

DATASET = textwrap.dedent('''\
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, Dataset


    class Features(Dataset):
        def __init__(self):
            self.backbone = nn.Linear(4, 3)
    {freeze}
            self.x = torch.randn(10, 4)

        def __len__(self):
            return 10

        def __getitem__(self, i):
            return self.backbone(self.x[i])


    def main():
        for batch in DataLoader(Features(), batch_size=2, num_workers=1):
            print(batch.shape)


    if __name__ == "__main__":
        main()
    ''')

FREEZES = {
    "loop": "        for p in self.backbone.parameters():\n            p.requires_grad = False",
    "method": "        self.backbone.requires_grad_(False)",
    "named": "        for name, p in self.backbone.named_parameters():\n            p.requires_grad_(False)",
}

COPY = textwrap.dedent('''\
    import copy

    import somelib
    from torch import nn


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(2, 2)

        def forward(self, x):
            self.last = self.lin(x)
            return self.last


    def main():
        net = Net()
        {before}
        return copy.deepcopy(net)


    if __name__ == "__main__":
        main()
    ''')


def _lint(tmp_path: Path, text: str) -> tuple[list[str], list[str]]:
    (tmp_path / "prog.py").write_text(text)
    check = subprocess.run([sys.executable, "-m", "flake8_graphleaf", "check", "--isolated", "--no-cache",
                            "--output-format", "concise", "prog.py"], capture_output=True, text=True, cwd=tmp_path,
                           timeout=300)
    flake8 = subprocess.run([sys.executable, "-m", "flake8", "--isolated", "--select=GLF", "prog.py"],
                            capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert check.returncode in (0, 1), check.stderr
    return ([line.removeprefix("./") for line in check.stdout.splitlines() if ": GLF" in line],
            [line.removeprefix("./") for line in flake8.stdout.splitlines() if ": GLF" in line])


@pytest.mark.parametrize("freeze", sorted(FREEZES))
def test_a_frozen_backbone_in_a_workers_dataset_is_clean(tmp_path, freeze):
    check, flake8 = _lint(tmp_path, DATASET.replace("{freeze}", FREEZES[freeze]))
    assert check == [] and flake8 == [], check + flake8


def test_a_trainable_embedding_in_a_workers_dataset_is_reported(tmp_path):
    check, flake8 = _lint(tmp_path, DATASET.replace("{freeze}\n", ""))
    codes = sorted(line.split(" ")[0] + " " + line.split(" ")[1] for line in check)
    assert codes == ["prog.py:19:18: GLF301"], check  # the item is made in its return: the loader names it
    assert "runs Features.__getitem__ in worker processes" in check[0], check
    assert sorted(line.split(" ")[0] for line in flake8) == [c.split(" ")[0] for c in codes], flake8


def test_a_module_copied_before_any_forward_is_judged_by_the_run(tmp_path):
    check, flake8 = _lint(tmp_path, COPY.replace("{before}", "print(net)"))
    assert [line.split(" ")[1] for line in check] == ["GLF001"], check
    assert "copy.deepcopy(model) will raise after forward" in check[0], check  # not "copy.deepcopy(net) at line 20"
    assert [line.split(" ")[1] for line in flake8] == ["GLF001"], flake8


def test_a_module_handed_to_code_the_run_does_not_follow_keeps_its_copy_finding(tmp_path):
    check, flake8 = _lint(tmp_path, COPY.replace("{before}", "somelib.fit(net)"))
    assert [line.split(" ")[1] for line in check] == ["GLF001", "GLF202"], check
    assert "copy.deepcopy(net) at line 20 will raise" in check[0], check
    assert [line.split(" ")[1] for line in flake8] == ["GLF001", "GLF202"], flake8
