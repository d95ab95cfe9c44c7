"""Writing a benchmark's section of docs/performance.md, leaving the other sections alone."""

from __future__ import annotations

import os
import platform
import re
import time
from pathlib import Path

import ortools

REPORT = Path(__file__).resolve().parent.parent / "docs" / "performance.md"


def machine_line() -> str:
    """When, on what, under which load: absolute times on a shared machine need it."""
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return (
        f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {os.cpu_count()} "
        f"cores (load average {load}), Python {platform.python_version()}, OR-Tools "
        f"{ortools.__version__}"
    )


def write_section(section: str, lines: list[str]) -> None:
    """Replace the body of `section` (a "## ..." heading) with `lines`."""
    text = REPORT.read_text()
    pattern = re.compile(rf"^{re.escape(section)}\n.*?(?=^## |\Z)", re.S | re.M)
    if not pattern.search(text):
        raise SystemExit(f"{REPORT} has no '{section}' section to fill")
    body = "\n".join(lines)
    REPORT.write_text(pattern.sub(lambda _: f"{section}\n\n{body}\n\n", text, count=1))
