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


class Fix:
    """A fix: its applicability (SAFE or UNSAFE), what it does, and its text edits.

    The edits may be given as ``build``, a function that makes them when they are first needed:
    ``graphleaf check`` only shows the description, and building some edits (a generated
    ``__getstate__``, with libcst) costs more than the analysis of the file.  ``build`` returns the
    edits, or an empty tuple when they turn out not to be buildable (the fixer then applies nothing).
    """

    __slots__ = ("applicability", "description", "_edits", "_build")

    def __init__(self, applicability: str, description: str, edits: tuple[Edit, ...] = (), build=None):
        self.applicability = applicability
        self.description = description
        self._edits = tuple(edits)
        self._build = build

    @property
    def edits(self) -> tuple[Edit, ...]:
        if self._build is not None:
            build, self._build = self._build, None
            self._edits = tuple(build())
        return self._edits

    @property
    def built(self) -> bool:
        """Whether the edits exist already (reading :attr:`edits` builds them)."""
        return self._build is None

    def __reduce__(self):
        # A builder does not cross a process boundary: the worker builds the edits a front end will
        # show (Settings.fix_edits) before it hands a report back; any other fix arrives without them.
        return (Fix, (self.applicability, self.description, self._edits, None if self.built else _left_behind))

    def __eq__(self, other):
        if not isinstance(other, Fix):
            return NotImplemented
        return (self.applicability, self.description, self.edits) == (other.applicability, other.description, other.edits)

    def __hash__(self):
        return hash((self.applicability, self.description))

    def __repr__(self):
        edits = repr(self._edits) if self.built else "<not built>"
        return f"Fix({self.applicability!r}, {self.description!r}, {edits})"


def _left_behind():
    raise RuntimeError("a fix's edits were not built before its report left the worker process "
                       "(Settings.fix_edits was off); please report it")


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
    # The proof (analysis/witness.py): source, steps, how it is reached, why it is kept, what
    # deepcopy copies.  Every finding under a default code has one.
    witness: dict | None = field(default=None, compare=False, repr=False)
    # Extra facts a fixer needs (kept out of the message).
    data: dict = field(default_factory=dict, compare=False, repr=False)
    # The steps of the witness taken on trust ({"kind", "text"} each; analysis/confidence.py) and
    # the level they give: high (none that lowers it), medium (one), low (several).
    trust: list = field(default_factory=list, compare=False, repr=False)
    confidence: str = field(default="high", compare=False)

    @property
    def sort_key(self) -> tuple[int, int, str]:
        return (self.line, self.col, self.code)

    def text(self) -> str:
        return f"{self.code} {self.message}"
