"""MiniMalloc's CSV: read problems and solutions, write them back.

One buffer a row, header first::

    id,lower,upper,size[,alignment][,offset]
    b1,0,3,4

The lifetime is half-open ``[lower, upper)``. The header may also say
``buffer`` for ``id``, ``start``/``begin`` for ``lower``, and ``end`` for an
*inclusive* last step (``upper = end + 1``). An ``offset`` column makes the
file a solution. MiniMalloc puts the capacity in the file name
(``A.1048576.csv``); `read_problem` takes it from there unless told otherwise.
"""

from __future__ import annotations

import csv
import os
import re
from pathlib import Path
from typing import Any

import numpy as np

from memplan.errors import ProblemError
from memplan.groups import alias_units
from memplan.limits import MAX_BYTES
from memplan.output_files import open_replacing
from memplan.plan import Plan
from memplan.problem import Problem

_COLUMNS = {  # header word -> (field, shift added to the value)
    "id": ("id", 0), "buffer": ("id", 0),
    "lower": ("start", 0), "start": ("start", 0), "begin": ("start", 0),
    "upper": ("end", 0), "end": ("end", 1),
    "size": ("size", 0), "alignment": ("alignment", 0), "offset": ("offset", 0),
}
_REQUIRED = ("id", "start", "end", "size")
_WHOLE = re.compile(r"[0-9]+")  # one rule for every number: ASCII digits (a minus before)
_COLUMN = re.compile(r"\s*-?[0-9]+\s*(?:,\s*-?[0-9]+\s*)*")  # a column of them, comma-joined


def capacity_from_name(path: str | os.PathLike) -> int | None:
    """``A.1048576.csv`` -> 1048576; None when the name carries no capacity."""
    parts = Path(path).name.split(".")
    return int(parts[-2]) if len(parts) >= 3 and _WHOLE.fullmatch(parts[-2]) else None


def _parse(path: str | os.PathLike):
    """Rows of the file as columns of ints (ids as strings); errors name file and line."""
    name = str(path)
    try:
        handle = open(path, newline="", encoding="utf-8-sig")  # Excel writes a BOM
    except OSError as error:
        raise ProblemError(f"cannot read: {error.strerror}", file=name) from None
    with handle:
        reader = csv.reader(handle)
        try:
            header = next(reader)
        except StopIteration:
            raise ProblemError("empty file, expected a header id,lower,upper,size",
                               file=name) from None
        except (csv.Error, UnicodeDecodeError) as error:
            raise ProblemError(f"not a CSV file ({error})", file=name, line=1) from None
        fields = []
        for word in header:
            key = word.strip().lower()
            if key not in _COLUMNS:
                raise ProblemError(f"unknown column {word!r}; expected "
                                   f"{', '.join(_COLUMNS)}", file=name, line=1)
            fields.append(_COLUMNS[key])
        names = [f for f, _ in fields]
        for needed in _REQUIRED:
            if needed not in names:
                raise ProblemError(f"missing column for {needed!r} in header {','.join(header)}",
                                   file=name, line=1)
        rows, lines = [], []
        try:
            for row in reader:
                if "".join(row).strip():  # blank lines are skipped
                    rows.append(row)
                    lines.append(reader.line_num)
        except (csv.Error, UnicodeDecodeError) as error:
            raise ProblemError(f"not a CSV file ({error})", file=name,
                               line=reader.line_num) from None
    for row, line in zip(rows, lines, strict=True):
        if len(row) != len(fields):
            raise ProblemError(f"malformed row: {len(row)} fields, the header has "
                               f"{len(fields)}", file=name, line=line)
    columns: dict[str, Any] = {}
    for k, (field, shift) in enumerate(fields):
        cells = [row[k] for row in rows]
        columns[field] = [cell.strip() for cell in cells] if field == "id" else \
            _integers(cells, shift, field, name, lines)
    return columns


def _integers(cells: list[str], shift: int, field: str, name: str, lines: list[int]):
    """The cells as integers plus ``shift``: one C-level match of the whole column, then
    an int64 array. Otherwise cell by cell: the first that is not an integer in ASCII
    digits names its line; past `MAX_BYTES`, Python ints (`Problem` names the buffer)."""
    if _COLUMN.fullmatch(",".join(cells)):
        try:
            values = np.fromiter(map(int, cells), np.int64, len(cells))
        except (ValueError, OverflowError):  # a quoted comma, or past int64
            values = None
        if values is not None and (not len(values) or
                                   max(values.max(), -values.min()) <= MAX_BYTES):
            return values + shift
    for cell, line in zip(cells, lines, strict=True):
        if not _WHOLE.fullmatch(cell.strip().removeprefix("-")):
            raise ProblemError(f"{field} must be an integer in ASCII digits, "
                               f"got {cell.strip()!r}", file=name, line=line)
    return [int(cell.strip()) + shift for cell in cells]  # what was checked: \x1c-\x1f too


def read_problem(path: str | os.PathLike, *, capacity: int | None | str = "name") -> Problem:
    """The problem in a MiniMalloc CSV (an ``offset`` column is ignored here).

    ``capacity="name"`` takes it from the file name, as MiniMalloc does;
    give an int or None to override.
    """
    columns = _parse(path)
    n = len(columns["id"])
    cap = capacity_from_name(path) if capacity == "name" else capacity
    try:
        return Problem.from_arrays(
            columns["size"], columns["start"], columns["end"], ids=columns["id"],
            alignments=columns.get("alignment"), capacity=cap,
            name=Path(path).name.split(".")[0], source=str(path))
    except ProblemError as error:
        if error.buffer is not None and n:  # say the line too
            line = columns["id"].index(error.buffer) + 2
            raise ProblemError(error.reason, file=str(path), line=line,
                               buffer=error.buffer) from None
        raise


def read_solution(path: str | os.PathLike, *, capacity: int | None | str = "name"
                  ) -> tuple[Problem, dict[str, int]]:
    """A solution file: its problem and the offsets of its ``offset`` column."""
    problem = read_problem(path, capacity=capacity)
    offsets = _parse(path).get("offset")
    if offsets is None:
        raise ProblemError("no offset column: this is a problem, not a solution", file=str(path))
    return problem, dict(zip(problem.ids, offsets, strict=True))


def csv_refusal(problem: Problem, *, planned: bool = False) -> str | None:
    """Why ``problem`` cannot be written as MiniMalloc CSV (None when it can): the format has
    no place for pinned offsets, explicit conflicts, regions, variable scratch sizes (unless
    ``planned``: a plan's granted sizes are written), or an alias group whose alignment is
    not a multiple of one number at its base."""
    lost = [what for what, has in (("pinned offsets", (problem.pinned >= 0).any()),
                                   ("explicit conflicts", len(problem.conflicts)),
                                   ("memory regions", len(problem.regions)),
                                   ("variable-size scratch", not planned and
                                    (problem.max_sizes > problem.sizes).any())) if has]
    if not lost and not problem.alias_optional.all():
        units = alias_units(problem.replace(aliases=_mandatory(problem)))
        skewed = np.flatnonzero(units.residue != 0)
        if len(skewed):
            lost.append(f"the alignment of the alias group of "
                        f"{problem.ids[int(units.first_member[skewed[0]])]!r}")
    if not lost:
        return None
    return f"MiniMalloc CSV cannot hold {', '.join(lost)}; use memplan JSON (.json)"


def _mandatory(problem: Problem) -> list:
    return [a for a in problem.aliases if not a.optional]


def csv_rows(problem: Problem) -> tuple[Problem, np.ndarray]:
    """The problem as CSV rows: one row per group of mandatory aliases, and the buffer whose
    id and offset each row carries.

    A group becomes its bounding rectangle (the union of its members' lifetimes, its extent
    as size, its alignment at its base), named after a member at the base: a layout of the
    rows is a valid layout of ``problem`` once `expand_offsets` puts every member back at
    its distance from the base. Optional aliases are left out (a plan need not take them).
    Refused (`ProblemError`) when `csv_refusal` says so.
    """
    reason = csv_refusal(problem)
    if reason is not None:
        raise ProblemError(reason, file=problem.source)
    mandatory = _mandatory(problem)
    if not mandatory:
        return problem.replace(aliases=[]), np.arange(len(problem))
    units = alias_units(problem.replace(aliases=mandatory))
    at_base = np.full(len(units), -1, np.int64)
    order = np.flatnonzero(units.rel == 0)
    at_base[units.unit_of[order[::-1]]] = order[::-1]  # the first member at the base
    starts = np.full(len(units), np.iinfo(np.int64).max)
    ends = np.zeros(len(units), np.int64)
    np.minimum.at(starts, units.unit_of, problem.starts)
    np.maximum.at(ends, units.unit_of, problem.ends)
    rows = Problem.from_arrays(units.extent, starts, ends,
                               ids=[problem.ids[b] for b in at_base.tolist()],
                               alignments=units.modulus, capacity=problem.capacity,
                               name=problem.name, source=problem.source)
    return rows, at_base


def expand_offsets(problem: Problem, offsets: dict[str, int]) -> dict[str, int]:
    """Every buffer's offset from a solution of `csv_rows`: a member of an alias group missing
    from ``offsets`` sits at its distance above the group's row."""
    if len(offsets) == len(problem):
        return offsets
    units = alias_units(problem.replace(aliases=_mandatory(problem)))
    base = {}
    for b, unit in enumerate(units.unit_of.tolist()):
        if problem.ids[b] in offsets and unit not in base:
            base[unit] = offsets[problem.ids[b]] - int(units.rel[b])
    expanded = dict(offsets)
    for b, unit in enumerate(units.unit_of.tolist()):
        if problem.ids[b] not in expanded and unit in base:
            expanded[problem.ids[b]] = base[unit] + int(units.rel[b])
    return expanded


def write_csv(path: str | os.PathLike, problem: Problem, plan: Plan | None = None) -> None:
    """Write the problem (and the plan's offsets, as a solution) in MiniMalloc's CSV.

    One row per group of mandatory aliases (`csv_rows`; a problem without
    aliases: one row per buffer); optional aliases are left out. What the format
    cannot hold (`csv_refusal`) is refused rather than written lossily.
    """
    rows, carrier = csv_rows(problem)
    header = ["id", "lower", "upper", "size"]
    columns = [rows.ids, rows.starts, rows.ends, rows.sizes]
    if (rows.alignments != 1).any():
        header.append("alignment")
        columns.append(rows.alignments)
    if plan is not None:
        header.append("offset")
        columns.append(np.asarray(plan.offsets)[carrier])
    with open_replacing(path, "w", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(zip(*(list(map(str, c)) if i == 0 else np.asarray(c).tolist()
                               for i, c in enumerate(columns)), strict=True))
