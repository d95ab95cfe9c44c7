"""Rows to CSV, JSONL or Parquet as each scenario finishes, and read back for resuming.

CSV and JSONL are appended and flushed a row at a time, so a killed study keeps every row
it finished; a row cut off mid-write (no newline yet) is dropped on resume and its
scenario run again. Parquet cannot be appended to (its footer, written last, is what makes
the file readable, so a writer killed before it leaves nothing), so rows go to an appended
JSONL sidecar (`results.parquet.rows.jsonl`) and the Parquet file is written from it in one
pass when the study ends, atomically (a temporary file renamed); the sidecar then goes.
Resuming a finished Parquet study reads the Parquet file back into a new sidecar.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, Literal

from optimizer.studies.rows import Row
from optimizer.studies.spec import StudyError

FORMATS = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet"}
Mode = Literal["new", "resume", "overwrite"]
SIDECAR_SUFFIX = ".rows.jsonl"
TAIL_CHUNK_BYTES = 65_536
# Columns that are text whatever they look like (a hex key may read as a number).
TEXT_COLUMNS = frozenset(
    {
        "key", "compute", "status", "error", "error_field", "model_name", "gpu_name",
        "recompute", "schedule", "placement", "binding", "binding_all", "frontier", "warnings",
    }
)  # fmt: skip


def output_format(path: Path) -> str:
    try:
        return FORMATS[path.suffix.lower()]
    except KeyError:
        raise StudyError(
            f"--out {path}: the format is chosen by the suffix: .csv, .jsonl or .parquet", "out"
        ) from None


def sidecar_of(path: Path) -> Path:
    return path.with_name(path.name + SIDECAR_SUFFIX)


def _append_target(path: Path) -> Path:
    return sidecar_of(path) if output_format(path) == "parquet" else path


def existing_rows(path: Path) -> list[Row]:
    """The rows an earlier run left (none if nothing is there), typed as they were written."""
    target = _append_target(path)
    if target.exists():
        drop_partial_line(target)
        return _read_csv(target) if output_format(path) == "csv" else _read_jsonl(target)
    if output_format(path) == "parquet" and path.exists():
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()  # type: ignore[no-any-return]
    return []


def drop_partial_line(path: Path) -> None:
    """Cut a last line the writer did not finish (killed mid-write)."""
    with path.open("rb+") as handle:
        end = handle.seek(0, os.SEEK_END)
        position = end
        while position > 0:
            start = max(0, position - TAIL_CHUNK_BYTES)
            handle.seek(start)
            chunk = handle.read(position - start)
            if position == end and chunk.endswith(b"\n"):
                return
            newline = chunk.rfind(b"\n")
            if newline >= 0:
                handle.truncate(start + newline + 1)
                return
            position = start
        handle.truncate(0)


def _read_jsonl(path: Path) -> list[Row]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _read_csv(path: Path) -> list[Row]:
    with path.open(newline="", encoding="utf-8") as handle:
        return [
            {name: _typed(name, text) for name, text in row.items()}
            for row in csv.DictReader(handle)
        ]


def _typed(column: str, text: str | None) -> Any:
    """A CSV cell back to the value written: empty is None, then bool, int, float, text."""
    if text is None or text == "":
        return None
    if column in TEXT_COLUMNS:
        return text
    if text in ("true", "false"):
        return text == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _csv_cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return " ".join(str(value).splitlines())  # one row, one line: resume cuts by lines


class RowWriter:
    """Appends rows (flushed one at a time) to the study's output; `finish` writes the
    Parquet file, if that is the format."""

    def __init__(self, path: Path, columns: list[str], mode: Mode) -> None:
        self.path, self.columns, self.format = path, columns, output_format(path)
        self.target = _append_target(path)
        self._prepare(mode)
        fresh = not self.target.exists() or self.target.stat().st_size == 0
        self.target.parent.mkdir(parents=True, exist_ok=True)
        self._handle: IO[str] = self.target.open("a", newline="", encoding="utf-8")
        self._csv = csv.writer(self._handle) if self.format == "csv" else None
        if self._csv is not None and fresh:
            self._csv.writerow(columns)
            self._handle.flush()

    def _prepare(self, mode: Mode) -> None:
        there = [p for p in dict.fromkeys((self.path, self.target)) if p.exists()]
        if mode == "new" and there:
            raise StudyError(
                f"{there[0]} exists: pass --resume to go on with it, or --force to replace it",
                "out",
            )
        if mode == "overwrite":
            for stale in there:
                stale.unlink()
        elif mode == "resume":
            self._check_resumable()

    def _check_resumable(self) -> None:
        if self.format == "parquet" and not self.target.exists() and self.path.exists():
            rows = existing_rows(self.path)  # a finished Parquet study: back into a sidecar
            with self.target.open("w", encoding="utf-8") as sidecar:
                sidecar.writelines(json.dumps(row) + "\n" for row in rows)
        if self.format == "csv" and self.target.exists():
            drop_partial_line(self.target)
            with self.target.open(newline="", encoding="utf-8") as handle:
                header = next(csv.reader(handle), None)
            if header is not None and header != self.columns:
                raise StudyError(
                    f"{self.path} holds another study's columns ({', '.join(header[:6])}, ...); "
                    "resume only the same study, or write to a new file",
                    "out",
                )
        elif self.target.exists():
            drop_partial_line(self.target)

    def write(self, row: Row) -> None:
        if self._csv is not None:
            self._csv.writerow([_csv_cell(row.get(name)) for name in self.columns])
        else:
            self._handle.write(json.dumps(row) + "\n")
        self._handle.flush()  # a killed study keeps this row

    def close(self) -> None:
        self._handle.close()

    def finish(self) -> None:
        """Close, and for Parquet write the file from the sidecar and remove the sidecar."""
        self.close()
        if self.format == "parquet":
            write_parquet(self.path, _read_jsonl(self.target), self.columns)
            self.target.unlink()

    def __enter__(self) -> RowWriter:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def write_parquet(path: Path, rows: list[Row], columns: list[str]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pylist([{name: row.get(name) for name in columns} for row in rows])
    partial = path.with_name(path.name + ".partial")
    pq.write_table(table, partial)
    os.replace(partial, path)  # readers never see a half-written file


def keys_of(rows: list[Row]) -> Iterator[str]:
    return (str(row["key"]) for row in rows if row.get("key"))
