"""Score flake8-graphleaf on held-out incident set 12: ../score.py on this folder's cases
(python3 score.py [BIN] [--repo R] [--commit REV | --working-tree] [--python PY] [--only caseNN,...])."""
import os
import runpy
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.argv[1:1] = ["--set", HERE]
runpy.run_path(os.path.join(os.path.dirname(HERE), "score.py"), run_name="__main__")
