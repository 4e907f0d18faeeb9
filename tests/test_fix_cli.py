"""``graphleaf fix`` end to end: the expected fixed fixtures, and how files are written."""

from __future__ import annotations

import ast
import os
import shutil
import stat
from pathlib import Path

import pytest

from test_cli import BUGGY, ROOT, run

# The writer tests need a one-line edit: a private attribute nothing reads becomes a local variable
# (a public one gets the copy-safe __getstate__ instead, tested in test_copysafe.py).
BUGGY = BUGGY.replace("self.out", "self._out")

FIX_DIR = ROOT / "fixtures" / "fix"


def _pairs():
    out = []
    for before in sorted(FIX_DIR.glob("*.py")):
        if before.name.endswith(".fixed.py"):
            continue
        stem = before.name[: -len(".py")]
        safe = FIX_DIR / f"{stem}.fixed.py"
        unsafe = FIX_DIR / f"{stem}.unsafe.fixed.py"
        if safe.exists():
            out.append(pytest.param(before, safe, False, id=f"{stem}-safe"))
        if unsafe.exists():
            out.append(pytest.param(before, unsafe, True, id=f"{stem}-unsafe"))
    return out


PAIRS = _pairs()


@pytest.mark.skipif(not PAIRS, reason="no fixtures/fix/<name>.py + <name>.fixed.py pairs yet")
@pytest.mark.parametrize("before, expected, unsafe", PAIRS)
def test_fix_gives_the_expected_file_and_a_second_run_is_a_no_op(tmp_path, before, expected, unsafe):
    target = tmp_path / before.name
    shutil.copyfile(before, target)
    flags = ["--unsafe-fixes"] if unsafe else []
    r = run("fix", *flags, target.name, cwd=tmp_path)
    assert r.returncode in (0, 1), r.stderr
    assert "Traceback" not in r.stdout + r.stderr
    assert target.read_text(encoding="utf-8") == expected.read_text(encoding="utf-8")
    mtime = target.stat().st_mtime_ns
    again = run("fix", *flags, target.name, cwd=tmp_path)
    assert "Fixed 0 findings in 0 files" in again.stdout
    assert target.stat().st_mtime_ns == mtime
    diff = run("fix", "--diff", *flags, target.name, cwd=tmp_path)
    assert diff.returncode == 0 and diff.stdout == ""


@pytest.mark.parametrize("before", sorted(p for p in FIX_DIR.glob("*.py") if not p.name.endswith(".fixed.py")),
                         ids=lambda p: p.stem)
def test_safe_run_leaves_a_fixture_with_only_unsafe_fixes_unchanged(tmp_path, before):
    if (FIX_DIR / f"{before.stem}.fixed.py").exists():
        pytest.skip("has a safe fix")
    target = tmp_path / before.name
    shutil.copyfile(before, target)
    r = run("fix", target.name, cwd=tmp_path)
    assert target.read_bytes() == before.read_bytes()
    if r.returncode == 1:
        assert "--unsafe-fixes" in r.stdout or "no automatic fix" in r.stdout


def _write(path: Path, text: str, *, encoding="utf-8", newline="\n", bom=False) -> bytes:
    data = text.replace("\n", newline).encode(encoding)
    if bom:
        data = b"\xef\xbb\xbf" + data
    path.write_bytes(data)
    return data


def test_fix_writes_and_reports(tmp_path):
    _write(tmp_path / "m.py", BUGGY)
    r = run("fix", "m.py", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "m.py:10:9: GLF001 fixed:" in r.stdout
    assert "Fixed 1 finding in 1 file" in r.stdout
    text = (tmp_path / "m.py").read_text()
    assert "self._out" not in text and "out = self.fc(x)" in text
    ast.parse(text)


def test_crlf_stays_crlf(tmp_path):
    before = _write(tmp_path / "m.py", BUGGY, newline="\r\n")
    run("fix", "m.py", cwd=tmp_path)
    after = (tmp_path / "m.py").read_bytes()
    assert after != before
    assert after.count(b"\r\n") == after.count(b"\n") == before.count(b"\r\n")


def test_mixed_newlines_keep_each_untouched_line_ending(tmp_path):
    text = BUGGY.replace("class M", "class M", 1)
    data = text.encode()
    data = data.replace(b"import torch.nn as nn\n", b"import torch.nn as nn\r\n")  # one CRLF line
    (tmp_path / "m.py").write_bytes(data)
    run("fix", "m.py", cwd=tmp_path)
    after = (tmp_path / "m.py").read_bytes()
    assert after.startswith(b"import torch.nn as nn\r\n") and after.count(b"\r\n") == 1


def test_bom_and_coding_line_are_kept(tmp_path):
    _write(tmp_path / "bom.py", BUGGY, bom=True)
    latin = "# -*- coding: latin-1 -*-\n# café\n" + BUGGY.replace("_out", "_lat")  # not a reader of bom.py's _out
    _write(tmp_path / "latin.py", latin, encoding="latin-1")
    r = run("fix", ".", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    bom = (tmp_path / "bom.py").read_bytes()
    assert bom.startswith(b"\xef\xbb\xbf") and b"self._out" not in bom
    lat = (tmp_path / "latin.py").read_bytes()
    assert lat.startswith(b"# -*- coding: latin-1 -*-\n# caf\xe9\n") and b"self._lat" not in lat


def test_file_mode_is_kept_and_no_temp_files_left(tmp_path):
    _write(tmp_path / "m.py", BUGGY)
    os.chmod(tmp_path / "m.py", 0o750)
    run("fix", "m.py", cwd=tmp_path)
    assert stat.S_IMODE((tmp_path / "m.py").stat().st_mode) == 0o750
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.py"]


def test_symlink_stays_a_link(tmp_path):
    _write(tmp_path / "real.py", BUGGY)
    (tmp_path / "link.py").symlink_to("real.py")
    run("fix", "link.py", cwd=tmp_path)
    assert (tmp_path / "link.py").is_symlink()
    assert "self._out" not in (tmp_path / "real.py").read_text()


def test_unchanged_files_are_not_touched(tmp_path):
    _write(tmp_path / "clean.py", "x = 1\n")
    _write(tmp_path / "m.py", BUGGY)
    os.utime(tmp_path / "clean.py", ns=(1_000_000_000, 1_000_000_000))
    run("fix", ".", cwd=tmp_path)
    assert (tmp_path / "clean.py").stat().st_mtime_ns == 1_000_000_000


def test_diff_writes_nothing_and_exit_codes(tmp_path):
    before = _write(tmp_path / "m.py", BUGGY)
    r = run("fix", "--diff", "m.py", cwd=tmp_path)
    assert r.returncode == 1
    assert r.stdout.startswith("--- a/m.py\n+++ b/m.py\n")
    assert "-        self._out = self.fc(x)" in r.stdout and "+        out = self.fc(x)" in r.stdout
    assert "Would fix 1 finding" in r.stderr
    assert (tmp_path / "m.py").read_bytes() == before
    _write(tmp_path / "m.py", "x = 1\n")
    r = run("fix", "--diff", "m.py", cwd=tmp_path)
    assert r.returncode == 0 and r.stdout == ""


def test_noqa_is_honoured(tmp_path):
    text = BUGGY.replace("self._out = self.fc(x)", "self._out = self.fc(x)  # noqa: GLF001")
    before = _write(tmp_path / "a.py", text)
    # other names in the other files: a.py's self._out is a reader of any other file's _out
    _write(tmp_path / "b.py", "# flake8: noqa\n" + BUGGY.replace("_out", "_out_b"))
    _write(tmp_path / "c.py", BUGGY.replace("self._out = self.fc(x)", "self._out = self.fc(x)  # noqa: E501").replace("_out", "_out_c"))
    r = run("fix", ".", cwd=tmp_path)
    assert (tmp_path / "a.py").read_bytes() == before
    assert "self._out_b" in (tmp_path / "b.py").read_text()
    assert "self._out_c" not in (tmp_path / "c.py").read_text()
    assert "Fixed 1 finding in 1 file" in r.stdout


def test_noqa_for_another_glf_code_does_not_stop_the_fix(tmp_path):
    _write(tmp_path / "c.py", BUGGY.replace("self._out = self.fc(x)", "self._out = self.fc(x)  # noqa: GLF002"))
    run("fix", ".", cwd=tmp_path)
    assert "self._out" not in (tmp_path / "c.py").read_text()


def test_select_and_ignore_limit_fixes(tmp_path):
    before = _write(tmp_path / "m.py", BUGGY)
    run("fix", "--ignore", "GLF001", "m.py", cwd=tmp_path)
    assert (tmp_path / "m.py").read_bytes() == before
    run("fix", "--select", "GLF2", "m.py", cwd=tmp_path)
    assert (tmp_path / "m.py").read_bytes() == before
    run("fix", "--select", "GLF001", "m.py", cwd=tmp_path)
    assert (tmp_path / "m.py").read_bytes() != before


def test_per_file_ignores_limit_fixes(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.graphleaf]\nper-file-ignores = { "legacy/*" = ["GLF001"] }\n')
    (tmp_path / "legacy").mkdir()
    before = _write(tmp_path / "legacy" / "m.py", BUGGY.replace("_out", "_old"))
    _write(tmp_path / "m.py", BUGGY)
    run("fix", ".", cwd=tmp_path)
    assert (tmp_path / "legacy" / "m.py").read_bytes() == before
    assert "self._out" not in (tmp_path / "m.py").read_text()


UNFIXABLE = BUGGY.replace("self._out = self.fc(x)\n        return self._out",
                          "self._out = self.fc(x)\n        return self._out\n\n    def other(self):\n"
                          "        return self._out")


def test_what_is_left_is_reported_with_how_to_enable(tmp_path):
    _write(tmp_path / "m.py", UNFIXABLE)
    r = run("fix", "m.py", cwd=tmp_path)
    assert "GLF001" in r.stdout
    if "left: unsafe fix" in r.stdout:
        assert "--unsafe-fixes" in r.stdout and r.returncode == 1
        r = run("fix", "--unsafe-fixes", "m.py", cwd=tmp_path)
        assert "fixed:" in r.stdout
    elif "left:" in r.stdout:
        assert r.returncode == 1


def test_unsafe_fixes_from_config(tmp_path):
    _write(tmp_path / "m.py", UNFIXABLE)
    check = run("check", "--output-format", "json", "m.py", cwd=tmp_path)
    import json

    items = json.loads(check.stdout)
    if not any(i["fix"] and i["fix"]["applicability"] == "unsafe" for i in items):
        pytest.skip("no unsafe fix for this sample")
    before = (tmp_path / "m.py").read_bytes()
    run("fix", "m.py", cwd=tmp_path)
    assert (tmp_path / "m.py").read_bytes() == before
    (tmp_path / "pyproject.toml").write_text("[tool.graphleaf]\nunsafe-fixes = true\n")
    run("fix", "--no-unsafe-fixes", "m.py", cwd=tmp_path)
    assert (tmp_path / "m.py").read_bytes() == before
    run("fix", "m.py", cwd=tmp_path)
    assert (tmp_path / "m.py").read_bytes() != before


def test_bad_inputs_do_not_stop_the_others(tmp_path):
    _write(tmp_path / "m.py", BUGGY)
    (tmp_path / "syntax.py").write_text("def f(:\n")
    (tmp_path / "binary.py").write_bytes(b"\xff\xfe\x00x")
    (tmp_path / "pkg.py").mkdir()
    r = run("fix", ".", "missing.py", cwd=tmp_path)
    assert r.returncode == 1
    out = r.stdout + r.stderr
    assert "Traceback" not in out
    assert "syntax.py:1:8: GLF900 SyntaxError: invalid syntax" in out
    assert "binary.py:1:1: GLF900 could not read: not Python source: a binary file" in out
    assert "missing.py:1:1: GLF900 could not read: No such file or directory" in out
    assert "self._out" not in (tmp_path / "m.py").read_text()


def test_stdin_fix_prints_the_fixed_source(tmp_path):
    # stdin has no project: any attribute may be read elsewhere, so only the copy-safe fix is safe
    r = run("fix", "--stdin-filename", "m.py", "-", stdin=BUGGY, cwd=tmp_path)
    assert "def __getstate__(self):" in r.stdout and 'state["_out"] = detached(state["_out"])' in r.stdout
    ast.parse(r.stdout)
    r = run("fix", "-", stdin="x = 1\n", cwd=tmp_path)
    assert r.stdout == "x = 1\n" and r.returncode == 0


def test_many_files_in_parallel_are_all_fixed_once(tmp_path):
    for i in range(40):
        _write(tmp_path / f"m{i:02}.py", BUGGY.replace("_out", f"_out{i}"))
    r = run("fix", "-j", "4", ".", cwd=tmp_path)
    assert r.returncode == 0 and "Fixed 40 findings in 40 files" in r.stdout
    assert all("self._out" not in p.read_text() for p in tmp_path.glob("*.py"))
    assert run("fix", "-j", "4", "--diff", ".", cwd=tmp_path).returncode == 0


# ---------------------------------------------------------------- writer, in process


def test_writer_refuses_text_its_encoding_cannot_hold(tmp_path):
    from flake8_graphleaf.fix.writer import SourceError, encode, read_source

    p = tmp_path / "latin.py"
    p.write_bytes(b"# -*- coding: latin-1 -*-\nx = 1\n")
    src = read_source(str(p))
    with pytest.raises(SourceError, match="cannot be encoded"):
        encode(src, src.text + "y = '\u20ac'\n")
    with pytest.raises(SourceError, match="read back"):
        encode(src, "import os\n" + src.text.replace("latin-1", "utf-8"))


def test_interrupted_write_leaves_the_old_file(tmp_path, monkeypatch):
    from flake8_graphleaf.fix import writer

    p = tmp_path / "m.py"
    p.write_text("old\n")

    def boom(src, dst):
        raise KeyboardInterrupt

    monkeypatch.setattr(writer.os, "replace", boom)
    with pytest.raises(KeyboardInterrupt):
        writer.write_atomic(str(p), b"new\n")
    assert p.read_text() == "old\n"
    assert [x.name for x in tmp_path.iterdir()] == ["m.py"]


def test_write_refuses_a_file_changed_meanwhile(tmp_path):
    from flake8_graphleaf.fix.writer import SourceError, write_atomic

    p = tmp_path / "m.py"
    p.write_text("changed\n")
    with pytest.raises(SourceError, match="changed on disk"):
        write_atomic(str(p), b"new\n", expected_old=b"old\n")
    assert p.read_text() == "changed\n"


@pytest.mark.parametrize("raw", [
    b"a\r\nb\r\n", b"a\nb", b"a\rb\r", b"a\r\nb\nc\rd", b"", b"\n", b"x = '\x0c'\r\n",
    b"\xef\xbb\xbfa\r\n",
])
def test_unchanged_text_encodes_back_to_the_same_bytes(raw):
    from flake8_graphleaf.fix.writer import decode, encode

    src = decode(raw)
    assert encode(src, src.text) == raw
