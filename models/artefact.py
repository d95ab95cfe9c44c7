"""What a training engine reads to run a layout: a value every answer can carry."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Artefact:
    """What the engine reads to run a layout: a command-line fragment, a JSON config, ..."""

    engine: str
    format: str
    filename: str
    text: str
