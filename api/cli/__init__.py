"""`layoutopt`, the command line: the commands (main.py), the request every command builds
from `--spec` and flags (common.py), the search and validation commands, the terminal
rendering (render.py), and the study spec reader the benchmarks share (study.py)."""

from api.cli.main import main
from api.cli.study import load_spec

__all__ = ["load_spec", "main"]
