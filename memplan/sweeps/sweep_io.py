"""A sweep's rows on disk: one fixed set of columns, CSV appended, Parquet rewritten.

A sweep can run for hours and be stopped at any moment (Ctrl-C, a lost
machine), so every finished row must already be on disk, and a later run
must be able to read them back to skip those tasks (resume):

- CSV (``.csv``, no dependency): the header once, then one line per row,
  flushed as the row arrives. A last row cut short by a crash (or a full
  disk), even inside a quoted field, is dropped when the file is read back
  and cut off the file before new rows are appended, with a warning naming
  the file and line (its task simply runs again); every complete row stays.
  A row that does not parse anywhere else is an error naming the line;
- Parquet (``.parquet``/``.pq``, needs pyarrow: ``pip install 'memplan[parquet]'``):
  the format has no append, so the whole table is written to a temporary
  file and renamed over the old one (atomic), at most every
  `PARQUET_EVERY` seconds and when the writer closes. A crash loses at most
  those seconds of rows, never the file;
- reading back checks the columns: a file written by something else is
  refused rather than mixed with a sweep's rows.

Cost: CSV O(1) per row; Parquet O(rows) per rewrite, throttled.
"""

from __future__ import annotations

import csv
import os
import warnings
from pathlib import Path
from typing import Any

from memplan.budget import Stopwatch
from memplan.errors import ProblemError
from memplan.shares import PARQUET_EVERY

# name -> pandas dtype; the order is the order of the columns in files and tables
COLUMNS: dict[str, str] = {
    "model": "string",  # the file's stem (more of its path where files share a stem)
    "bindings": "string",  # the shape planned: "batch=8,seq=128" ('' as in the file)
    "batch": "Int64",  # the batch size it was re-batched to (empty: as in the file)
    "capacity": "Int64",  # the capacity planned under, bytes (empty: minimise)
    "planner": "string",  # a registered planner, or "solve" (the memplan.solve pipeline)
    "buffers": "Int64",
    "lower_bound": "Int64",  # max live bytes: no plan is smaller
    "arena_size": "Int64",
    "best_bound": "Int64",  # the bound the planner proved (exact: may exceed lower_bound)
    "status": "string",  # optimal | feasible | infeasible | unknown | error
    "gap": "Float64",  # (arena_size - best_bound) / arena_size: proven distance from optimal
    "seconds": "Float64",  # the planner's wall time
    "total_seconds": "Float64",  # on the worker: load + plan + validate
    "peak_memory": "Int64",  # the worker process's peak resident bytes during the task
    "valid": "boolean",  # the plan passed memplan.validate on its worker
    "winner": "string",  # the composition a composite planner ("best") kept
    "error": "string",  # 'ProblemError: model.onnx: ...' when the task failed
    "worker": "string",  # where it ran
    "settings": "string",  # the planner options ("time_limit=10,seed=0,threads=1")
    "path": "string",  # the model file as named
    "task": "string",  # the row's key: path|bindings|capacity|planner|settings
}
SUFFIXES = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}


def finish_row(row: dict[str, Any]) -> dict[str, Any]:
    """``row`` with every column, in order (missing ones None)."""
    return {name: row.get(name) for name in COLUMNS}


class RowWriter:
    """Rows of one sweep into ``path`` (.csv or .parquet), as they come."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.format = SUFFIXES.get(self.path.suffix.lower())
        if self.format is None:
            raise ProblemError(f"the sweep's output must end in "
                               f"{', '.join(SUFFIXES)}", file=str(path))
        if self.format == "parquet":
            try:
                import pyarrow  # noqa: F401
            except ImportError:
                raise ProblemError("Parquet output needs pyarrow: pip install "
                                   "'memplan[parquet]' (or write .csv)", file=str(path)) from None
        self._rows: list[dict[str, Any]] = []  # Parquet: every row, rewritten together
        self._written = Stopwatch(ago=PARQUET_EVERY)  # the first rows are written at once
        self._file = None
        self._csv = None
        self._repaired = False  # the CSV's tail was checked (once per writer)

    def existing(self) -> dict[str, dict[str, Any]]:
        """The rows already in the file, by task key (empty when there is no file)."""
        if not self.path.exists() or self.path.stat().st_size == 0:
            return {}
        if self.format == "csv":
            self._repair_tail()
        table = read_rows(self.path)
        rows = {row["task"]: row for row in table.to_dict("records")}
        if self.format == "parquet":
            self._rows = list(rows.values())
        return rows

    def append(self, row: dict[str, Any]) -> None:
        if self.format == "csv":
            self._append_csv(row)
            return
        self._rows.append(row)
        if self._written.elapsed() >= PARQUET_EVERY:
            self._write_parquet()

    def _append_csv(self, row: dict[str, Any]) -> None:
        if self._file is None:
            fresh = not self.path.exists() or self.path.stat().st_size == 0
            if not fresh:
                self._repair_tail()
            self._file = open(self.path, "a", newline="")
            self._csv = csv.writer(self._file)
            if fresh:
                self._csv.writerow(COLUMNS)
        self._csv.writerow(["" if row[name] is None else row[name] for name in COLUMNS])
        self._file.flush()

    def _repair_tail(self) -> None:
        """Cut a last row that a crash left unfinished off the file (with a warning), so that
        new rows start on a line of their own, outside any quoted field."""
        if self._repaired:
            return
        self._repaired = True
        cut = _records(self.path, quiet=True)[2]
        if cut is not None:
            line, offset = cut
            with open(self.path, "rb+") as f:
                f.truncate(offset)
            warnings.warn(f"{self.path}:{line}: dropped a row cut short (a crash or a full "
                          f"disk?); its task runs again", RowsWarning, stacklevel=3)

    def _write_parquet(self) -> None:
        import pandas as pd

        temporary = self.path.with_name(self.path.name + ".tmp")
        table = pd.DataFrame(self._rows, columns=list(COLUMNS)).astype(COLUMNS)
        table.to_parquet(temporary, index=False)
        os.replace(temporary, self.path)
        self._written = Stopwatch()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        if self.format == "parquet" and self._rows:
            self._write_parquet()


def read_rows(path: str | os.PathLike):
    """A sweep's output file as a DataFrame with `COLUMNS` (broken CSV lines dropped)."""
    import pandas as pd

    path = Path(path)
    if SUFFIXES.get(path.suffix.lower()) == "parquet":
        table = pd.read_parquet(path)
    else:
        header, rows, _ = _records(path)
        table = pd.DataFrame(rows, columns=header, dtype="string").fillna("")
    missing = [name for name in COLUMNS if name not in table.columns]
    if missing:
        raise ProblemError(f"not a memplan sweep's rows (no column {missing[0]!r}); write "
                           f"to another file", file=str(path))
    table = table[list(COLUMNS)]
    if SUFFIXES.get(path.suffix.lower()) != "parquet":
        table = _typed_csv(table, path)
    return table.astype(COLUMNS)


class RowsWarning(UserWarning):
    """A sweep's rows file needed a repair that loses no complete row (a cut last row)."""


def _records(path: Path, *, quiet: bool = False
             ) -> tuple[list[str], list[list[str]], tuple[int, int] | None]:
    """``(header, rows, cut)`` of a sweep's CSV; ``cut`` is ``(line, byte offset)`` of a last
    row left unfinished (no final newline, an open quote, too few fields), else None.

    Rows elsewhere with another number of fields than the header are skipped
    (with a warning unless ``quiet``); text that is no CSV before the last row
    is a `ProblemError` naming the line.
    """
    data = path.read_bytes()
    text = data.decode("utf-8", "surrogateescape")
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])
    reader = csv.reader(lines, strict=True)
    records: list[tuple[list[str], int]] = []  # each with the line where it ends
    try:
        for record in reader:
            records.append((record, reader.line_num))
    except csv.Error as error:
        if reader.line_num < len(lines):
            raise ProblemError(f"not a CSV row ({error}); remove or fix that line",
                               file=str(path), line=reader.line_num) from None
        records.append(([], len(lines)))  # an open quote at the end: the row was cut
    if not records or not records[0][0]:
        return [], [], None
    header = records[0][0]
    cut = None
    last = records[-1][0]
    if len(records) > 1 and (not text.endswith("\n") or len(last) != len(header)):
        start = records[-2][1]  # the cut row begins on the line after the previous row
        cut = (start + 1, len("".join(lines[:start]).encode("utf-8", "surrogateescape")))
        records.pop()
    rows = [record for record, _ in records[1:] if len(record) == len(header)]
    if len(rows) < len(records) - 1 and not quiet:
        first = next(end for record, end in records[1:] if len(record) != len(header))
        warnings.warn(f"{path}:{first}: skipped {len(records) - 1 - len(rows)} rows whose "
                      f"number of fields is not the header's ({len(header)})", RowsWarning,
                      stacklevel=3)
    return header, rows, cut


def _typed_csv(table, path: Path):
    """CSV text to the columns' types; a row that does not parse (cut short) is dropped."""
    import pandas as pd

    table = table[table["task"].str.len() > 0].copy()
    for name, dtype in COLUMNS.items():
        if dtype == "string":
            if name != "bindings":  # '' there means "as in the file"; elsewhere: missing
                table[name] = table[name].replace("", None)
            continue
        text = table[name].replace("", None)
        if dtype == "boolean":
            table[name] = text.map({"True": True, "False": False, None: None})
        else:
            table[name] = pd.to_numeric(text, errors="coerce")
    return table


__all__ = ["COLUMNS", "RowWriter", "RowsWarning", "finish_row", "read_rows"]
