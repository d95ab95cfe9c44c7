"""`layoutopt`, the command line: the commands (main.py), the request every command builds
from `--spec` and flags (common.py), the search and validation commands, and the terminal
rendering (render.py)."""

from api.cli.main import main

__all__ = ["main"]
