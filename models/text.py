"""Text that names a thing (a model's name) and is written where a line is a unit: a comment
of a launch script, of an overrides file, a terminal line. Such text must stay one line of
printable characters, whatever it came from.

Refused or escaped: the Unicode categories Cc (C0 controls with newline and CR, DEL, C1
controls with NEL U+0085), Zl and Zp (U+2028, U+2029: line breaks to Unicode and to
JavaScript), Cf (format characters: bidirectional overrides make a line read otherwise than
it runs, CVE-2021-42574) and Cs (lone surrogates, which UTF-8 cannot encode).
Unicode Standard Annex #14 lists the characters that break a line; these include them all.
"""

from __future__ import annotations

import unicodedata

UNPRINTABLE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
# A name written into an artefact: the longest a request's name may be (TransformerSpec).
NAME_MAX_CHARS = 200


def unprintable(text: str) -> list[str]:
    """The characters of `text` that would break its line or hide what it says, in order."""
    return [ch for ch in text if _is_unprintable(ch)]


def escaped(ch: str) -> str:
    """A character as Python writes it in a string literal: \\n, \\x85, \\u2028."""
    return ch.encode("unicode_escape", "backslashreplace").decode("ascii")


def one_line(text: str, max_chars: int = NAME_MAX_CHARS) -> str:
    """`text` as one line of printable text: each unprintable character written as its escape
    (visible, and not a line break to any reader), the whole cut to `max_chars` with an
    ellipsis."""
    line = "".join(escaped(ch) if _is_unprintable(ch) else ch for ch in text)
    return line if len(line) <= max_chars else line[: max_chars - 3] + "..."


def _is_unprintable(ch: str) -> bool:
    return unicodedata.category(ch) in UNPRINTABLE_CATEGORIES


def printable_name(name: str) -> str:
    """`name` if it is one line of printable text (a validator: the error says which
    character, escaped, and where)."""
    bad = unprintable(name)
    if bad:
        at = name.index(bad[0])
        raise ValueError(
            f"a name is one line of printable text: {escaped(bad[0])!s} at character {at} "
            f"({len(bad)} such)"
        )
    return name
