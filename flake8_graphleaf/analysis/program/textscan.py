"""``word in text``, asked once per text and word.

The rules' gates ask the checked file's text for the same rare words again and again
(``deepcopy``, ``DataLoader``, ``.put(``, ``Process(`` ...: the copy graph's, the copy rules',
the process rule's and the run's liveness words overlap), and a word that is absent costs a scan
of the whole text each time (about 0.02 s over torch's 46 MB per word).  The answers are kept for
the last few texts asked about, and a word that contains a shorter one the text does not have is
absent without a scan (``deepcopy(`` without ``deepcopy``).  The answers are those of ``in``.
"""

from __future__ import annotations

# word -> a shorter word it contains, asked first: when the text lacks it, it lacks the word
_ANCHOR = {
    "deepcopy(": "deepcopy",
    "deepcopy as ": "deepcopy",
    ".put(": ".put",
    ".put_nowait(": ".put",
    "Process(": "Process",
    "ProcessPoolExecutor(": "Process",
    "start_processes(": "start_processes",
    "spawn(": "spawn",
    "register_forward_hook": "register_forward",
    "register_forward_pre_hook": "register_forward",
    "register_module_forward_hook": "register_module_forward",
    "register_module_forward_pre_hook": "register_module_forward",
}

_KEEP = 8  # texts whose answers are kept (the checked file's, and the few the copy graph reads beside it)
_memo: dict[int, tuple[str, dict[str, bool]]] = {}


def _answers(text: str) -> dict[str, bool]:
    entry = _memo.get(id(text))
    if entry is not None and entry[0] is text:
        return entry[1]
    if len(_memo) >= _KEEP:
        del _memo[next(iter(_memo))]  # the oldest
    found: dict[str, bool] = {}
    _memo[id(text)] = (text, found)  # the text is held, so its id is not reused while it is here
    return found


def has(text: str, word: str) -> bool:
    """``word in text``."""
    found = _answers(text)
    answer = found.get(word)
    if answer is None:
        anchor = _ANCHOR.get(word)
        answer = found[word] = (anchor is None or has(text, anchor)) and word in text
    return answer


def has_any(text: str, words) -> bool:
    """``any(w in text for w in words)``."""
    found = _answers(text)
    for word in words:
        answer = found.get(word)
        if answer is None:
            anchor = _ANCHOR.get(word)
            answer = found[word] = (anchor is None or has(text, anchor)) and word in text
        if answer:
            return True
    return False
