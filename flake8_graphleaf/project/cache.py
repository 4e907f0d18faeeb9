"""A content-addressed store on disk, in ruff's shape: ``.graphleaf_cache/`` with a
``CACHEDIR.TAG`` and a ``.gitignore`` of ``*``.

    cache = Cache.open(root, enabled=True)
    cache.get("findings", key)          # None when absent, corrupt or unreadable
    cache.put("findings", key, data)    # JSON-able data; atomic; silent on a read-only dir

Keys are strings the caller builds (see :func:`key`): the content hash of the file, the
settings that change the answer, and this tool's build (its version and its source files'
sizes and mtimes, always mixed in, so neither an upgrade nor an edited checkout reads an old
entry).  Entries live at ``<dir>/<version>/<kind>/<k[:2]>/<k>.json``.
Used by the CLI (kind="findings"), and usable by the plugin and the project index
(kind="summary"): it imports nothing from the rest of the package but its version.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

from .. import __version__

DIR_NAME = ".graphleaf_cache"
ENV = "GRAPHLEAF_CACHE_DIR"
TAG = ("Signature: 8a477f597d28d172789f06886806bc55\n"
       "# This file is a cache directory tag created by graphleaf.\n"
       "# For information about cache directory tags see https://bford.info/cachedir/\n")


_BUILD: str | None = None


def build_stamp() -> str:
    """This installation of graphleaf: its version and the size and mtime of each of its own
    source files, so that an edited checkout (an editable install) never reads entries that an
    older analysis wrote under the same version number."""
    global _BUILD
    if _BUILD is None:
        package = Path(__file__).resolve().parent.parent
        h = hashlib.sha256(__version__.encode())
        for path in sorted([*package.rglob("*.py"), *package.rglob("*.json")]):  # the torch table answers too
            try:
                st = path.stat()
            except OSError:
                continue
            h.update(f"{path.relative_to(package)}:{st.st_size}:{st.st_mtime_ns};".encode())
        _BUILD = h.hexdigest()
    return _BUILD


def key(*parts: object) -> str:
    """A hex key for ``parts`` (bytes are hashed as they are, everything else as its repr),
    always mixed with :func:`build_stamp`."""
    h = hashlib.sha256(build_stamp().encode())
    for p in parts:
        data = p if isinstance(p, bytes) else repr(p).encode("utf-8", "surrogatepass")
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def default_dir(root: Path | str) -> Path:
    env = os.environ.get(ENV)
    return Path(env) if env else Path(root) / DIR_NAME


class Cache:
    def __init__(self, directory: Path | None):
        self.directory = directory  # None: disabled
        self._ready = False
        self.hits = self.misses = 0

    @classmethod
    def open(cls, root: Path | str, enabled: bool = True, directory: Path | str | None = None) -> "Cache":
        """The cache for a project rooted at ``root`` (``directory``, else $GRAPHLEAF_CACHE_DIR,
        else ``root/.graphleaf_cache``); a disabled one answers every get with None."""
        if not enabled:
            return cls(None)
        return cls(Path(directory) if directory is not None else default_dir(root))

    @property
    def enabled(self) -> bool:
        return self.directory is not None

    def _path(self, kind: str, k: str) -> Path:
        return self.directory / __version__ / kind / k[:2] / f"{k}.json"

    def get(self, kind: str, k: str):
        if self.directory is None:
            return None
        try:
            with open(self._path(kind, k), "r", encoding="utf-8") as fh:
                entry = json.load(fh)
        except (OSError, ValueError, UnicodeDecodeError):
            self.misses += 1
            return None
        if not isinstance(entry, dict) or entry.get("key") != k or "data" not in entry:
            self.misses += 1
            return None
        self.hits += 1
        return entry["data"]

    def _prepare(self) -> bool:
        if self._ready:
            return True
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            tag = self.directory / "CACHEDIR.TAG"
            if not tag.exists():
                tag.write_text(TAG, encoding="utf-8")
            ignore = self.directory / ".gitignore"
            if not ignore.exists():
                ignore.write_text("# Automatically created by graphleaf.\n*\n", encoding="utf-8")
        except OSError:
            return False
        self._ready = True
        return True

    def put(self, kind: str, k: str, data) -> bool:
        """Store ``data``; False (and nothing raised) when the directory cannot be written."""
        if self.directory is None or not self._prepare():
            return False
        path = self._path(kind, k)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".", suffix=".tmp", dir=path.parent)
        except OSError:
            return False
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump({"key": k, "data": data}, fh, separators=(",", ":"), ensure_ascii=False)
            os.replace(tmp, path)
        except (OSError, TypeError, ValueError):
            try:
                os.unlink(tmp)
            except OSError:
                pass
            return False
        return True
