"""Reading and writing Python sources without changing what the fix did not touch.

A source is decoded as Python decodes it (a BOM, a PEP 263 coding line, else UTF-8)
and its newlines are read as flake8 reads them (universal newlines), so the analysis
sees the very text flake8 hands to the plugin.  Writing goes the other way: lines the
fix left alone keep their original ending, new lines get the file's dominant one,
the text is encoded as it was (BOM included), and the bytes replace the file in one
``os.replace`` from a temporary file in the same folder, with the old file's mode.
"""

from __future__ import annotations

import ast
import bisect
import difflib
import io
import os
import re
import stat
import tempfile
import tokenize
from dataclasses import dataclass

from ..project.encoding import not_utf8

MAX_BYTES = 10 * 1024 * 1024

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")


class SourceError(Exception):
    """A file that cannot be read, decoded or written; the message is one line."""


@dataclass(frozen=True)
class Source:
    text: str  # newlines normalised to "\n"
    raw: bytes
    encoding: str  # as tokenize names it: "utf-8", "utf-8-sig" (BOM), "latin-1", ...
    endings: tuple[str, ...]  # the original ending of each line ("" for a last line without one)

    @property
    def newline(self) -> str:
        """The most common line ending, "\\n" for a file without one."""
        counts: dict[str, int] = {}
        for e in self.endings:
            if e:
                counts[e] = counts.get(e, 0) + 1
        if not counts:
            return "\n"
        return max(sorted(counts), key=lambda e: counts[e])


def split_lines(text: str) -> list[str]:
    """Lines with their endings, splitting on \\r\\n, \\r and \\n only (not on \\f or \\u2028)."""
    return _LINE.findall(text)


def _not_utf8(raw: bytes, encoding: str) -> str | None:
    """The message for bytes that are not UTF-8 when no coding line says otherwise (a binary file
    is told so, a text file in another encoding how to declare it)."""
    if encoding not in ("utf-8", "utf-8-sig"):
        return None
    try:
        raw.decode("utf-8")
        return None
    except UnicodeDecodeError as exc:
        return not_utf8(raw, exc.start)


def decode(raw: bytes, name: str = "<stdin>") -> Source:
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
    except SyntaxError as exc:
        why = _not_utf8(raw, "utf-8")
        if why and "coding" not in raw[:200].decode("latin-1"):
            raise SourceError(why) from None
        raise SourceError(f"bad encoding declaration: {exc.msg if hasattr(exc, 'msg') else exc}") from None
    try:
        original = raw.decode(encoding)
    except UnicodeDecodeError as exc:
        why = _not_utf8(raw, encoding)
        if why:
            raise SourceError(why) from None
        raise SourceError(
            f"bad encoding: cannot decode as {encoding}: byte 0x{raw[exc.start]:02x} at offset {exc.start}"
        ) from None
    except LookupError:
        raise SourceError(f"unknown encoding {encoding!r}") from None
    if "\r" not in original:  # the usual case: \n endings only, the text as it is
        n = original.count("\n")
        endings = ("\n",) * n + (("",) if original and not original.endswith("\n") else ())
        return Source(text=original, raw=raw, encoding=encoding, endings=endings)
    lines = split_lines(original)
    endings = tuple(line[len(line.rstrip("\r\n")):] for line in lines)
    text = "".join(line.rstrip("\r\n") + ("\n" if e else "") for line, e in zip(lines, endings))
    return Source(text=text, raw=raw, encoding=encoding, endings=endings)


def read_bytes(path: str, max_bytes: int = MAX_BYTES) -> bytes:
    if os.path.isdir(path):
        raise SourceError("Is a directory, not a file")
    try:
        size = os.path.getsize(path)
        if size > max_bytes:
            raise SourceError(f"file is {size} bytes, larger than the {max_bytes}-byte limit")
        with open(path, "rb") as fh:
            return fh.read()
    except FileNotFoundError:
        raise SourceError("No such file or directory") from None
    except OSError as exc:
        raise SourceError(exc.strerror or str(exc)) from None


def read_source(path: str, max_bytes: int = MAX_BYTES) -> Source:
    return decode(read_bytes(path, max_bytes), path)


def line_opcodes(a: list[str], b: list[str]) -> list[tuple[str, int, int, int, int]]:
    """``difflib.SequenceMatcher(None, a, b).get_opcodes()`` in near-linear time on long
    files: lines that occur once in each (patience diff) anchor the match, and the
    matcher only runs on the short stretches between anchors."""
    if len(a) + len(b) < 2000:
        return difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
    count_a: dict[str, int] = {}
    for line in a:
        count_a[line] = count_a.get(line, 0) + 1
    count_b: dict[str, int] = {}
    for line in b:
        count_b[line] = count_b.get(line, 0) + 1
    where_a = {line: i for i, line in enumerate(a) if count_a[line] == 1 and count_b.get(line) == 1}
    pairs = [(where_a[line], j) for j, line in enumerate(b) if line in where_a]  # sorted by j
    # The longest run of pairs increasing in both (patience sorting, O(n log n)).
    tails: list[int] = []
    tails_i: list[int] = []
    back: list[int] = [-1] * len(pairs)
    for k, (i, _) in enumerate(pairs):
        pos = bisect.bisect_left(tails, i)
        if pos == len(tails):
            tails.append(i)
            tails_i.append(k)
        else:
            tails[pos] = i
            tails_i[pos] = k
        back[k] = tails_i[pos - 1] if pos else -1
    anchors: list[tuple[int, int]] = []
    k = tails_i[-1] if tails_i else -1
    while k >= 0:
        anchors.append(pairs[k])
        k = back[k]
    anchors.reverse()
    out: list[tuple[str, int, int, int, int]] = []

    def add(tag, i1, i2, j1, j2):
        if i1 == i2 and j1 == j2:
            return
        if out and out[-1][0] == tag == "equal":
            out[-1] = ("equal", out[-1][1], i2, out[-1][3], j2)
        else:
            out.append((tag, i1, i2, j1, j2))

    ia = ja = 0
    for ai, bj in anchors + [(len(a), len(b))]:
        # the stretch [ia, ai) x [ja, bj): common head and tail, then the matcher on the rest
        h = 0
        while ia + h < ai and ja + h < bj and a[ia + h] == b[ja + h]:
            h += 1
        t = 0
        while ai - t > ia + h and bj - t > ja + h and a[ai - t - 1] == b[bj - t - 1]:
            t += 1
        add("equal", ia, ia + h, ja, ja + h)
        mid = difflib.SequenceMatcher(None, a[ia + h:ai - t], b[ja + h:bj - t], autojunk=False)
        for tag, i1, i2, j1, j2 in mid.get_opcodes():
            add(tag, i1 + ia + h, i2 + ia + h, j1 + ja + h, j2 + ja + h)
        add("equal", ai - t, ai, bj - t, bj)
        if ai < len(a):
            add("equal", ai, ai + 1, bj, bj + 1)
        ia, ja = ai + 1, bj + 1
    return out


def unified_diff(old: list[str], new: list[str], fromfile: str, tofile: str, n: int = 3) -> str:
    """``difflib.unified_diff`` (lines with their endings) on :func:`line_opcodes`."""
    matcher = difflib.SequenceMatcher(None, old, new)
    matcher.opcodes = line_opcodes(old, new)  # get_grouped_opcodes reads the cached opcodes
    out: list[str] = []
    for group in matcher.get_grouped_opcodes(n):
        if not out:
            out += [f"--- {fromfile}\n", f"+++ {tofile}\n"]
        first, last = group[0], group[-1]
        out.append(f"@@ -{_range(first[1], last[2])} +{_range(first[3], last[4])} @@\n")
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                out += [" " + line for line in old[i1:i2]]
                continue
            if tag in ("replace", "delete"):
                out += ["-" + line for line in old[i1:i2]]
            if tag in ("replace", "insert"):
                out += ["+" + line for line in new[j1:j2]]
    return "".join(out)


def _range(start: int, stop: int) -> str:
    beginning, length = start + 1, stop - start
    if length == 1:
        return f"{beginning}"
    if not length:
        beginning -= 1
    return f"{beginning},{length}"


def restore_newlines(source: Source, new_text: str) -> str:
    """``new_text`` (with "\\n" newlines) with each line the fix left alone given back its
    original ending, and each new or changed line the file's dominant ending."""
    old_lines = source.text.split("\n")
    new_lines = new_text.split("\n")
    # A final "\n" leaves an empty last element; it carries no line of its own.
    endings_old = list(source.endings) + [""] * (len(old_lines) - len(source.endings))
    out: list[str] = []
    dominant = source.newline
    if all(e == dominant for e in source.endings[:-1]) and source.endings[-1:] in ((), (dominant,), ("",)):
        # Every line ends as the file mostly does: the common case, in linear time.
        return dominant.join(new_lines)
    # Mixed endings: match the lines the fix left alone.
    opcodes = line_opcodes(old_lines, new_lines)
    for tag, i1, i2, j1, j2 in opcodes:
        for k in range(j2 - j1):
            j = j1 + k
            last = j == len(new_lines) - 1
            if tag == "equal":
                ending = endings_old[i1 + k] or ("" if last else dominant)
            else:
                ending = "" if last else dominant
            if last:
                ending = ""
            out.append(new_lines[j] + ending)
    return "".join(out)


def encode(source: Source, new_text: str) -> bytes:
    """The bytes to write for ``new_text``; raises SourceError if they would not read back
    as the same text (an encoding the new text does not fit, or a moved coding line)."""
    text = restore_newlines(source, new_text)
    try:
        data = text.encode(source.encoding)
    except UnicodeEncodeError as exc:
        raise SourceError(f"the fixed text cannot be encoded as {source.encoding}: {exc.reason}") from None
    again = decode(data)
    if again.encoding != source.encoding or again.text != new_text:
        raise SourceError("the fixed text would not read back unchanged (its encoding declaration moved)")
    return data


def check_parses(text: str, name: str) -> None:
    try:
        ast.parse(text, filename=name)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise SourceError(f"the fixed text does not parse ({exc.__class__.__name__}); not written") from None


def write_atomic(path: str, data: bytes, expected_old: bytes | None = None) -> None:
    """Replace ``path`` with ``data`` in one rename, keeping its mode; a symlink stays a link
    and its target is replaced.  With ``expected_old``, refuse if the file changed since."""
    target = os.path.realpath(path)
    try:
        st = os.stat(target)
        if expected_old is not None:
            with open(target, "rb") as fh:
                if fh.read() != expected_old:
                    raise SourceError("changed on disk while being fixed; not written")
        folder = os.path.dirname(target) or "."
        fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(target) + ".", suffix=".graphleaf.tmp", dir=folder)
    except OSError as exc:
        raise SourceError(exc.strerror or str(exc)) from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, stat.S_IMODE(st.st_mode))
        os.replace(tmp, target)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise SourceError(exc.strerror or str(exc)) from None
        raise
