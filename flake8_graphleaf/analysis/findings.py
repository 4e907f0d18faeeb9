"""The data the analysis hands to its front ends: findings and their fixes."""

from __future__ import annotations

from dataclasses import dataclass, field

SAFE = "safe"
UNSAFE = "unsafe"


@dataclass(frozen=True)
class Edit:
    """Replace the text between two positions (1-based lines, 0-based character columns)."""

    line: int
    col: int
    end_line: int
    end_col: int
    content: str


@dataclass(frozen=True)
class Fix:
    applicability: str  # SAFE or UNSAFE
    description: str
    edits: tuple[Edit, ...]


@dataclass
class Finding:
    """One report. ``col`` is 0-based, counted as flake8 counts it (``ast`` col_offset)."""

    code: str
    line: int
    col: int
    message: str
    end_line: int | None = None
    end_col: int | None = None
    # What the finding is about, for the fixer, ``explain`` and GLF202.
    class_name: str | None = None
    attribute: str | None = None
    fix: Fix | None = None
    # Extra facts a fixer needs (kept out of the message).
    data: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def sort_key(self) -> tuple[int, int, str]:
        return (self.line, self.col, self.code)

    def text(self) -> str:
        return f"{self.code} {self.message}"
