"""The README as a new user runs it: every file it shows is written where it names it, every
`layoutopt` command it shows runs from that folder and exits 0, and every output it shows is
what the command prints (`...` stands for lines left out); its Python snippet runs against a
real server. So no example goes stale."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.markdown_examples import Block, assert_shows, blocks

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
LAYOUTOPT = Path(sys.executable).with_name("layoutopt")
FILE_NAME = re.compile(r"^`([\w.-]+)`:$")


def files(readme: list[Block]) -> dict[str, str]:
    """The files the README shows under a `name`: caption."""
    named = {}
    for block in readme:
        caption = FILE_NAME.match(block.caption.strip())
        if caption:
            named[caption.group(1)] = block.text
    return named


def examples(readme: list[Block]) -> list[tuple[str, str | None]]:
    """Each `layoutopt` command and the output shown right after it, if any."""
    shown = []
    for i, block in enumerate(readme):
        if block.language != "sh":
            continue
        for line in block.text.splitlines():
            if line.startswith("layoutopt "):
                after = readme[i + 1] if i + 1 < len(readme) else None
                output = after.text if after and after.language == "text" else None
                shown.append((line, output))
    return shown


README_BLOCKS = blocks(README.read_text())
EXAMPLES = examples(README_BLOCKS)


def test_the_readme_shows_an_example_per_use_and_stays_short() -> None:
    commands = [command.split()[1] for command, _ in EXAMPLES]
    assert {"evaluate", "optimize", "export", "study", "plan"} <= set(commands)
    assert len(README.read_text().splitlines()) < 200


@pytest.mark.parametrize(("command", "shown"), EXAMPLES, ids=[c for c, _ in EXAMPLES])
def test_each_readme_command_runs_and_prints_what_it_shows(
    tmp_path: Path, command: str, shown: str | None
) -> None:
    for name, text in files(README_BLOCKS).items():
        (tmp_path / name).write_text(text)
    words = command.split()[1:]
    done = subprocess.run(
        [str(LAYOUTOPT), *words], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    if shown is not None:
        printed = done.stdout
        out = re.search(r"--out (\S+)", command)
        if out and not printed.strip():  # the command wrote its answer to a file
            printed = (tmp_path / out.group(1)).read_text()
        assert_shows(printed, shown)


def test_the_readme_client_snippet_runs_against_a_real_server(make_server: Any) -> None:
    server = make_server()
    snippet = next(b.text for b in README_BLOCKS if b.language == "python")
    code = snippet.replace("http://127.0.0.1:8000", server.url)
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("optimal ")


def test_a_shown_line_missing_from_the_output_fails() -> None:
    assert_shows("a\nb\nc\nd\n", "a\n...\nc\nd")
    with pytest.raises(AssertionError):
        assert_shows("a\nb\nc\n", "b\na")
