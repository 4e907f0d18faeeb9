"""docs/cli.md shows what the command prints: one example per output format, each made by
running it on the bundled example (docs/cli_examples.py writes them; here they are compared)."""

from __future__ import annotations

import importlib.util

from test_cli import ROOT


def _examples():
    spec = importlib.util.spec_from_file_location("cli_examples", ROOT / "docs" / "cli_examples.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cli_md_has_a_real_example_of_every_output_format(capsys):
    from flake8_graphleaf.cli.output import FORMATS

    examples = _examples()
    text = examples.DOC.read_text(encoding="utf-8")
    commands = [m.group("cmd") for m in examples.MARKER.finditer(text)]
    for fmt in FORMATS:
        shown = [c for c in commands if (f"--output-format {fmt}" in c) or (fmt == "text" and "--output-format" not in c)]
        assert shown, f"docs/cli.md shows no {fmt} output"
    assert any("--statistics" in c for c in commands) and any("--show-witness" in c for c in commands)
    assert all("fixtures/example/" in c for c in commands)
    assert examples.main(["--check"]) == 0, capsys.readouterr().out + " (python docs/cli_examples.py rewrites them)"
