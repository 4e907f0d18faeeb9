"""``python -m flake8_graphleaf``: the ``graphleaf`` command."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
