"""Why bytes are not Python source, in words that fit what the bytes are: a binary file named
``.py`` is told so, a text file in another encoding is told to declare it (PEP 263) or be saved as
UTF-8.  Shared by ``graphleaf check`` / ``fix`` (fix.writer) and the flake8 plugin, which meets the
second kind after flake8 has read it as Latin-1 without a word (Python refuses to import it)."""

from __future__ import annotations

import io
import tokenize

# Control bytes a text file may hold (tab, newlines, form feed, vertical tab, escape).
_TEXT_CONTROLS = frozenset(b"\t\n\r\f\v\x1b")
_HEAD = 8192


def binary_byte(raw: bytes) -> int | None:
    """The offset of the first byte that says ``raw`` is no text file (a NUL, or a control byte
    where control bytes are more than 5% of the first 8 KiB), or None."""
    head = raw[:_HEAD]
    nul = head.find(b"\x00")
    if nul >= 0:
        return nul
    controls = [i for i, b in enumerate(head) if (b < 0x20 and b not in _TEXT_CONTROLS) or b == 0x7F]
    return controls[0] if len(controls) * 20 > len(head) else None


def not_utf8(raw: bytes, start: int) -> str:
    """The message for bytes that are not UTF-8 (the first bad one at ``start``) in a file with
    no coding line."""
    at = binary_byte(raw)
    if at is not None:
        line = raw.count(b"\n", 0, at) + 1
        return (f"not Python source: a binary file (byte 0x{raw[at]:02x} at offset {at}, line {line}); "
                "rename it or leave it out (extend-exclude)")
    line = raw.count(b"\n", 0, start) + 1
    return (f"bad encoding: byte 0x{raw[start]:02x} on line {line} is not UTF-8 and the file has no "
            f"PEP 263 coding line; add one (e.g. '# -*- coding: latin-1 -*-') or save the file as UTF-8")


def undecodable(raw: bytes) -> str | None:
    """Why Python cannot decode ``raw`` as source without a coding line saying otherwise, or None
    when it can (or a coding line declares the encoding: its errors are the reader's to report)."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
    except SyntaxError:
        encoding = "utf-8"
    if encoding not in ("utf-8", "utf-8-sig"):
        return None
    try:
        raw.decode(encoding)
        return None
    except UnicodeDecodeError as exc:
        return not_utf8(raw, exc.start)
