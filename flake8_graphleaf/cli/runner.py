"""Running a command over many files: batches, worker processes, the progress bar, Ctrl-C.

``run_many(func, files, jobs, progress, *extra)`` calls ``func(batch, *extra)`` in worker processes
(or serially) and gives the results back in the order of the files.  A worker stops before its next
file once the parent is interrupted, and tells the parent at once of each file it wrote
(``note_written``), so that every file changed is listed even from a worker that had to be ended.
"""

from __future__ import annotations

import gc
import os
import signal
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from contextlib import contextmanager

from .config import Settings
from .output import FileReport


# Set in a worker process when the parent was interrupted: stop before the next file.
_STOP = None
# In a worker: where each file written goes at once (a pipe), so that the parent can list
# every file changed even from a worker it had to terminate.
_WRITTEN = None


# The cyclic collector's thresholds while files are checked.  The analysis makes no reference
# cycles (tests/test_no_cycles.py: a file's trees, runs and walkers are freed by reference counting
# when its check ends), so what the collector would scan is only what a run keeps: the torch table,
# the program's parsed files, the memo (about 4M objects on torch).  Each collection walks the
# objects made since the last one, so at Python's default (700, 10, 10) it cost about a quarter of
# a torch-sized run's CPU time, and even at (100_000, 50, 100) about 1.4 s of 16 on torch.  At these
# it runs only after ten million more objects are alive, a safety net for a cycle that a future
# change might make.  Nothing the analysis finds depends on when garbage is collected.
GC_THRESHOLDS = (10_000_000, 10, 10)


# False in the ``graphleaf`` process itself (cli.entry): it ends right after the command, and
# putting the old thresholds back would start a collection of the whole heap on the next
# allocations (about 1 s on torch) for nothing.
RESTORE_THRESHOLDS = True


@contextmanager
def fewer_collections():
    """The collector at :data:`GC_THRESHOLDS` inside, as it was after (tests run commands in
    process), unless the process ends with the command (:data:`RESTORE_THRESHOLDS`)."""
    old = gc.get_threshold()
    gc.set_threshold(*GC_THRESHOLDS)
    try:
        yield
    finally:
        if RESTORE_THRESHOLDS:
            gc.set_threshold(*old)


def _init_worker(stop, written=None) -> None:
    global _STOP, _WRITTEN
    _STOP, _WRITTEN = stop, written
    gc.set_threshold(*GC_THRESHOLDS)  # a worker lives for the run (forked ones have it already)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides; a file is never cut in half


def stopped() -> bool:
    return _STOP is not None and _STOP.is_set()


def note_written(path: str) -> None:
    """In a worker: tell the parent at once that ``path`` was replaced."""
    if _WRITTEN is not None:
        _WRITTEN.put(path)


def with_edits(report, settings: Settings):
    """Build the edits of the fixes the output will show, before the report leaves this process."""
    if settings.fix_edits:
        shown = report.findings if isinstance(report, FileReport) else [f for f, _ in report.left]
        for f in shown:
            if f.fix is not None:
                f.fix.edits  # noqa: B018 - builds them
    return report


class Progress:
    """A one-line bar on stderr, for terminals only, shown once a run has taken 0.5 s."""

    def __init__(self, total: int, enabled: bool):
        self.total, self.done = total, 0
        self.enabled = enabled and total > 1
        self.start = time.monotonic()
        self.last = 0.0
        self.shown = False

    def advance(self, n: int) -> None:
        self.done += n
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self.start < 0.5 or (now - self.last < 0.1 and self.done < self.total):
            return
        self.last = now
        width = 30
        filled = width * self.done // self.total
        sys.stderr.write(f"\r[{'#' * filled}{' ' * (width - filled)}] {self.done}/{self.total} files")
        sys.stderr.flush()
        self.shown = True

    def close(self) -> None:
        if self.shown:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


def progress_wanted(quiet: bool) -> bool:
    if quiet or os.environ.get("CI") or os.environ.get("TERM") == "dumb":
        return False
    return sys.stderr.isatty()


class Interrupted(Exception):
    """Ctrl-C during :func:`run_many`; ``done`` holds the results of the files finished."""

    def __init__(self, done: list, written: set[str] | None = None):
        super().__init__("interrupted")
        self.done = done
        self.written = written or set()  # paths written by workers whose results did not come back


# After Ctrl-C, how long the workers get to finish the file each is on (a file, not a batch).
WORKER_STOP_S = 120.0


def run_many(func, files: list[str], jobs: int, progress: Progress, *extra) -> list:
    """``func(batch, *extra)`` over ``files`` in batches, in parallel when it pays;
    results come back in the order of ``files`` whatever finishes first.

    Ctrl-C raises :class:`Interrupted` once the files in hand are done: pending batches are
    cancelled, each worker (and the serial loop) finishes the file it is on (so a file is old
    or new, never half written, and each one changed is in ``done``), then the pool is
    terminated."""
    if not files:
        return []
    with fewer_collections():
        return _run_many(func, files, jobs, progress, *extra)


def _run_many(func, files: list[str], jobs: int, progress: Progress, *extra) -> list:
    size = max(1, min(16, len(files) // (jobs * 4) or 1))
    batches = [files[i:i + size] for i in range(0, len(files), size)]
    results: dict[int, list] = {}
    if jobs > 1 and len(files) >= 8:
        try:
            import multiprocessing

            mp = multiprocessing.get_context()
            stop, written = mp.Event(), mp.SimpleQueue()
            pool = ProcessPoolExecutor(max_workers=min(jobs, len(batches)), initializer=_init_worker,
                                       initargs=(stop, written))
        except (OSError, NotImplementedError, PermissionError, ImportError):
            pool = None  # no process pool here (sandbox, no /dev/shm): run serially below
        if pool is not None:
            futures = {}
            try:
                futures = {pool.submit(func, b, *extra): i for i, b in enumerate(batches)}
                for fut in as_completed(futures):
                    results[futures[fut]] = fut.result()
                    progress.advance(len(batches[futures[fut]]))
                pool.shutdown(wait=True)
            except KeyboardInterrupt:
                stop.set()
                for fut in futures:
                    fut.cancel()
                # Each running worker stops after the file it is on (it checks ``stop`` before each
                # one): wait for that, however busy the machine, so that no file is cut off mid-write.
                deadline = time.monotonic() + WORKER_STOP_S
                for fut, i in futures.items():
                    if i in results or fut.cancelled():
                        continue
                    try:
                        results[i] = fut.result(timeout=max(0.0, deadline - time.monotonic()))
                    except BaseException:  # noqa: BLE001 - timed out or failed: nothing to report
                        pass
                _terminate(pool)
                progress.close()
                paths = set()
                try:
                    while not written.empty():
                        paths.add(written.get())
                except (OSError, EOFError):
                    pass
                raise Interrupted([r for i in sorted(results) for r in results[i]], paths) from None
            except (OSError, PermissionError):
                _terminate(pool)
                results = {}
    done: list = []
    try:
        with _sigint_between_files() as pressed:
            for i, b in enumerate(batches):
                if i not in results:
                    for p in b:  # one file at a time: Ctrl-C stops after the file in hand
                        results.setdefault(i, []).extend(func([p], *extra))
                        if pressed():
                            raise KeyboardInterrupt
                    progress.advance(len(b))
    except KeyboardInterrupt:
        progress.close()
        done = [r for i in sorted(results) for r in results[i]]
        raise Interrupted(done) from None
    progress.close()
    return [r for i in range(len(batches)) for r in results[i]]


class _sigint_between_files:
    """Ctrl-C while a file is in hand takes effect once it is done (its report is then in the
    results, so a file written is always listed); the previous handler comes back afterwards.
    Outside the main thread (no signal handlers there) Ctrl-C is not deferred."""

    def __enter__(self):
        self.pending = False
        self.old = None
        try:
            self.old = signal.signal(signal.SIGINT, self._note)
        except ValueError:  # not the main thread
            self.old = None
        return lambda: self.pending

    def _note(self, signum, frame):
        self.pending = True

    def __exit__(self, *exc):
        if self.old is not None:
            signal.signal(signal.SIGINT, self.old)
        return False


def _terminate(pool: ProcessPoolExecutor) -> None:
    procs = list(getattr(pool, "_processes", {}).values())
    try:
        pool.shutdown(wait=False, cancel_futures=True)
    except Exception:  # noqa: BLE001
        pass
    for proc in procs:
        try:
            proc.terminate()
        except Exception:  # noqa: BLE001
            pass
    for proc in procs:
        try:
            proc.join(timeout=1.0)
        except Exception:  # noqa: BLE001
            pass
