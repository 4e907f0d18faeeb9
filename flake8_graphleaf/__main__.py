"""``python -m flake8_graphleaf``: the ``graphleaf`` command."""

from .cli import entry

if __name__ == "__main__":
    entry()
