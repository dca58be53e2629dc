"""memplan's own JSON: a problem with everything it can say, and a plan.

A problem file (fields after ``size`` are optional, defaults shown)::

    {"format": "memplan-problem", "version": 1, "name": "resnet", "capacity": null,
     "buffers": [{"id": "x", "size": 4096, "start": 0, "end": 3, "alignment": 1,
                  "offset": null, "regions": null, "kind": "activation",
                  "max_size": null}],
     "aliases": [{"src": "x", "dst": "y", "delta": 0, "optional": false}],
     "conflicts": [["x", "z"]],
     "regions": [{"name": "sram", "capacity": 262144, "cost": 0.0}],
     "widths": null,
     "steps": [{"name": "conv1", "op": "Conv", "reads": ["x"], "writes": ["y"]}]}

``steps`` (optional, written only when the problem has them) says what runs at
each step: the operator's name and type, the tensors it reads and writes, and
(``constants``, written when there are any) the constants it reads.

A plan file: offsets by buffer id, and what the planner knows::

    {"format": "memplan-plan", "version": 1, "planner": "exact", "status": "optimal",
     "arena_size": 8192, "lower_bound": 8192, "best_bound": 8192, "seconds": 0.01,
     "offsets": {"x": 0, "y": 0}, "regions": null, "sizes": null, "stats": {}}
"""

from __future__ import annotations

import json
import math
import os
from itertools import chain
from typing import Any

import numpy as np

from memplan.errors import ProblemError
from memplan.limits import MAX_BYTES, problem_with
from memplan.output_files import open_replacing
from memplan.plan import Plan
from memplan.problem import NO_OFFSET, Alias, Problem, Region, Step

VERSION = 1
_ABSENT = object()  # a field not in its entry


def problem_to_dict(problem: Problem) -> dict[str, Any]:
    """``problem`` as a memplan-problem JSON document (a dict); from its columns, O(n)."""
    columns = problem.ids, problem.sizes.tolist(), problem.starts.tolist(), problem.ends.tolist()
    buffers = [{"id": id, "size": size, "start": start, "end": end}
               for id, size, start, end in zip(*columns, strict=True)]
    written = {  # per optional field: (buffers where it is not the default, its value there)
        "alignment": (np.flatnonzero(problem.alignments != 1), problem.alignments.tolist()),
        "offset": (np.flatnonzero(problem.pinned != NO_OFFSET), problem.pinned.tolist()),
        "regions": ([i for i, r in enumerate(problem.allowed_regions) if r is not None],
                    [r and list(r) for r in problem.allowed_regions]),
        "kind": ([i for i, kind in enumerate(problem.kinds) if kind != "activation"],
                 problem.kinds),
        "max_size": (np.flatnonzero(problem.max_sizes != problem.sizes),
                     problem.max_sizes.tolist())}
    for key, (rows, values) in written.items():  # in this order: the fields' order
        for i in np.asarray(rows, dtype=np.int64).tolist():
            buffers[i][key] = values[i]
    document = {
        "format": "memplan-problem", "version": VERSION, "name": problem.name,
        "capacity": problem.capacity, "buffers": buffers,
        "aliases": [{"src": a.src, "dst": a.dst, "delta": a.delta, "optional": a.optional}
                    for a in problem.aliases],
        "conflicts": [[problem.ids[a], problem.ids[b]] for a, b in problem.conflicts.tolist()],
        "regions": [{"name": r.name, "capacity": r.capacity, "cost": r.cost}
                    for r in problem.regions],
        "widths": None if problem.widths is None else problem.widths.tolist(),
    }
    if problem.steps is not None:
        document["steps"] = [{"name": s.name, "op": s.op, "reads": list(s.reads),
                              "writes": list(s.writes)}
                             | ({"constants": list(s.constants)} if s.constants else {})
                             for s in problem.steps]
    return document


class _Reader:
    """Typed field access that names the file and the entry on every mistake."""

    def __init__(self, source: str | None):
        self.source = source

    def fail(self, where: str, message: str):
        raise ProblemError(f"{where}: {message}", file=self.source)

    def field(self, entry: Any, key: str, kinds: type | tuple, where: str, default=...):
        if not isinstance(entry, dict):
            self.fail(where, f"expected an object, got {type(entry).__name__}")
        if key not in entry or (entry[key] is None and default is not ...):
            if default is ...:
                self.fail(where, f"missing field {key!r}")
            return default
        value = entry[key]
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in
                                            (kinds if isinstance(kinds, tuple) else (kinds,))):
            names = kinds.__name__ if isinstance(kinds, type) else \
                " or ".join(k.__name__ for k in kinds)
            self.fail(where, f"field {key!r} must be {names}, got {value!r}")
        return value

    def names(self, entry: dict, key: str, where: str) -> list[str]:
        """A list of tensor names (strings), empty when absent."""
        value = self.field(entry, key, list, where, [])
        if not all(isinstance(x, str) for x in value):
            self.fail(where, f"field {key!r} must be a list of names, got {value!r}")
        return value

    def column(self, entries: list, key: str, kinds: type | tuple, where, default=...) -> list:
        """``field`` of every entry, checked as a whole column: one pass over the values'
        types when they are all well formed (the common case, ~30 ns an entry), else entry
        by entry so that the first bad one is named. ``where(i)`` names entry i."""
        exact = set(kinds) if isinstance(kinds, tuple) else {kinds}
        if set(map(type, entries)) <= {dict}:
            values = [e.get(key, _ABSENT) for e in entries]
            types = set(map(type, values))
            if default is not ...:
                types -= {type(None), type(_ABSENT)}
            if types <= exact:
                return values if default is ... else \
                    [default if v is None or v is _ABSENT else v for v in values]
        return [self.field(e, key, kinds, where(i), default) for i, e in enumerate(entries)]

    def items(self, document: dict, key: str) -> list:
        value = document.get(key) or []
        if not isinstance(value, list):
            self.fail(key, f"expected a list, got {type(value).__name__}")
        return value


def problem_from_dict(document: dict[str, Any], *, source: str | None = None) -> Problem:
    """The `Problem` in a parsed problem document; `ProblemError` names the bad entry."""
    r = _Reader(source)
    if not isinstance(document, dict) or document.get("format", "memplan-problem") \
            != "memplan-problem":
        r.fail("format", "not a memplan problem (expected \"format\": \"memplan-problem\")")
    _check_version(r, document, "problem")
    entries = r.items(document, "buffers")

    def named(i):  # an entry by its id when it has a usable one
        entry = entries[i]
        return f"buffer {entry['id']!r}" if isinstance(entry, dict) and \
            isinstance(entry.get("id"), str | int) else f"buffers[{i}]"

    ids = [str(id) for id in r.column(entries, "id", (str, int), lambda i: f"buffers[{i}]")]
    sizes, starts, ends = (r.column(entries, key, int, named) for key in ("size", "start", "end"))
    regions = [None if allowed is None else tuple(map(str, allowed))
               for allowed in r.column(entries, "regions", list, named, None)]
    max_sizes = [size if most is None else most for size, most in
                 zip(sizes, r.column(entries, "max_size", int, named, None), strict=True)]
    links = r.items(document, "aliases")

    def link(i):
        return f"aliases[{i}]"

    aliases = list(map(Alias, *([str(id) for id in r.column(links, key, (str, int), link)]
                                for key in ("src", "dst")),
                       r.column(links, "delta", int, link, 0),
                       r.column(links, "optional", bool, link, False)))
    conflicts = []
    for i, pair in enumerate(r.items(document, "conflicts")):
        if not isinstance(pair, list) or len(pair) != 2:
            r.fail(f"conflicts[{i}]", f"expected a pair of buffer ids, got {pair!r}")
        conflicts.append((str(pair[0]), str(pair[1])))
    memory_regions = [Region(str(r.field(e, "name", str, f"regions[{i}]")),
                             r.field(e, "capacity", int, f"regions[{i}]", None),
                             float(r.field(e, "cost", (int, float), f"regions[{i}]", 0.0)))
                      for i, e in enumerate(r.items(document, "regions"))]
    capacity = r.field(document, "capacity", int, "problem", None)
    widths = r.field(document, "widths", list, "problem", None)
    steps = None if document.get("steps") is None else _steps(r, r.items(document, "steps"))
    return Problem.from_arrays(
        sizes, starts, ends, ids=ids, alignments=r.column(entries, "alignment", int, named, 1),
        pinned=[NO_OFFSET if at is None else at
                for at in r.column(entries, "offset", int, named, None)],
        max_sizes=max_sizes, kinds=r.column(entries, "kind", str, named, "activation"),
        allowed_regions=regions, aliases=aliases, conflicts=conflicts, capacity=capacity,
        widths=widths, regions=memory_regions, name=str(document.get("name") or ""),
        source=source, steps=steps)


def _steps(r: _Reader, entries: list) -> list[Step]:
    """The steps of a problem document, checked column by column (see `_Reader.column`)."""

    def step(t):
        return f"steps[{t}]"

    names, ops = (r.column(entries, key, str, step, "") for key in ("name", "op"))
    reads, writes, constants = (r.column(entries, key, list, step, [])
                                for key in ("reads", "writes", "constants"))
    if not set(map(type, chain.from_iterable(reads + writes + constants))) <= {str}:
        for t, entry in enumerate(entries):  # name the first step with a bad name
            for key in ("reads", "writes", "constants"):
                r.names(entry, key, step(t))
    return list(map(Step, names, ops, map(tuple, reads), map(tuple, writes),
                    map(tuple, constants)))


def plan_to_dict(problem: Problem, plan: Plan) -> dict[str, Any]:
    """``plan`` as a memplan-plan JSON document (a dict), offsets by buffer id."""
    def by_id(values):
        return None if values is None else dict(zip(problem.ids, np.asarray(values).tolist(),
                                                     strict=True))

    region_names = None
    if plan.regions is not None and problem.regions:
        region_names = {id: problem.regions[r].name
                        for id, r in zip(problem.ids, plan.regions.tolist(), strict=True)}
    return {
        "format": "memplan-plan", "version": VERSION, "planner": plan.planner,
        "status": plan.status, "arena_size": plan.arena_size, "lower_bound": plan.lower_bound,
        "best_bound": plan.best_bound, "seconds": plan.seconds, "offsets": by_id(plan.offsets),
        "regions": region_names, "sizes": by_id(plan.sizes),
        "stats": json.loads(json.dumps(plan.stats, default=_plain)),
    }


def _plain(value):
    """JSON for numpy scalars and arrays in statistics."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return str(value)


def plan_from_dict(document: dict[str, Any], problem: Problem, *,
                   source: str | None = None) -> Plan:
    """The `Plan` in a parsed plan document, for ``problem``; every buffer must be there."""
    r = _Reader(source)
    if not isinstance(document, dict) or document.get("format") != "memplan-plan":
        r.fail("format", "not a memplan plan (expected \"format\": \"memplan-plan\")")
    _check_version(r, document, "plan")
    offsets = r.field(document, "offsets", dict, "plan")

    def in_order(values: dict, what: str, numbers: bool = True):
        missing = [id for id in problem.ids if id not in values]
        extra = [id for id in values if id not in problem._index]
        if missing or extra:
            r.fail(what, f"buffers missing: {missing[:5]}, unknown: {extra[:5]}")
        if numbers:
            for id in problem.ids:
                reason = problem_with(values[id], lowest=-MAX_BYTES)
                if reason is not None:
                    r.fail(f"{what} of buffer {id!r}", reason)
        return [values[id] for id in problem.ids]

    def number(key: str):
        value = r.field(document, key, int, "plan")
        reason = problem_with(value, lowest=0)
        if reason is not None:
            r.fail(f"plan: field {key!r}", reason)
        return value

    names = [reg.name for reg in problem.regions]
    regions = r.field(document, "regions", dict, "plan", None)
    sizes = r.field(document, "sizes", dict, "plan", None)
    status = r.field(document, "status", str, "plan")
    if status not in ("optimal", "feasible", "infeasible", "unknown"):
        r.fail("status", f"unknown status {status!r}")
    if regions is not None:
        for id, name in zip(problem.ids, in_order(regions, "regions", False), strict=True):
            if name not in names:
                r.fail(f"plan: field 'regions' of buffer {id!r}",
                       f"no region {name!r} in the problem (it has "
                       f"{', '.join(map(repr, names)) or 'none'})")
    plan = Plan(
        np.array(in_order(offsets, "offsets"), np.int64),
        number("arena_size"), number("lower_bound"), status, number("best_bound"),
        r.field(document, "planner", str, "plan"),
        _seconds(r, r.field(document, "seconds", (int, float), "plan", 0.0)),
        r.field(document, "stats", dict, "plan", {}),
        None if regions is None else np.array([names.index(n) for n in
                                               in_order(regions, "regions", False)], np.int64),
        None if sizes is None else np.array(in_order(sizes, "sizes"), np.int64),
    )
    _check_claims(r, plan)
    return plan


def _check_claims(r: _Reader, plan: Plan) -> None:
    """Refuse a plan whose claims contradict themselves, whatever the problem: a lower bound
    above the best bound, ``optimal`` with the arena above its bound. (`check_claims`
    checks those about the problem once the validator accepts the offsets.)"""
    if plan.lower_bound > plan.best_bound:
        r.fail("plan: field 'lower_bound'", f"{plan.lower_bound} is above the plan's "
                                            f"best_bound {plan.best_bound}")
    if plan.regions is None and plan.status == "optimal" and \
            plan.arena_size > plan.best_bound:
        r.fail("plan: field 'status'", f"'optimal', but the arena {plan.arena_size} is "
                                       f"above the proven bound {plan.best_bound}")


def check_claims(plan: Plan, source: str | None = None) -> None:
    """Refuse a plan that the validator accepted (its arena is the top of its buffers)
    with a bound above that arena: no valid layout is smaller than a true
    bound, so ``best_bound``, and ``optimal`` with it, are false. Plans with regions:
    their arena is their cost's, not checked. `ProblemError` naming ``source`` and the
    field."""
    if plan.regions is None and plan.best_bound > plan.arena_size:
        _Reader(source).fail("plan: field 'best_bound'", f"{plan.best_bound} is above the "
                             f"arena {plan.arena_size} of a valid plan: no plan is smaller "
                             f"than a true bound")


def _seconds(r: _Reader, value) -> float:
    if not math.isfinite(value) or value < 0:
        r.fail("plan: field 'seconds'", f"must be a finite number >= 0, got {value!r}")
    return float(value)


def _load(path: str | os.PathLike) -> Any:
    try:
        with open(path) as handle:
            return json.load(handle)
    except OSError as error:
        raise ProblemError(f"cannot read: {error.strerror}", file=str(path)) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        line = getattr(error, "lineno", None)
        raise ProblemError(f"not valid JSON ({error.msg if hasattr(error, 'msg') else error})",
                           file=str(path), line=line) from None
    except RecursionError:
        raise ProblemError("not a memplan file: JSON nested too deeply", file=str(path)) from None
    except ValueError as error:  # e.g. an integer of more digits than Python converts
        raise ProblemError(f"not valid JSON ({error})", file=str(path)) from None


def _check_version(r: _Reader, document: dict, what: str) -> None:
    """Refuse a document of another format version than this memplan writes (absent: ok)."""
    version = document.get("version", VERSION)
    if isinstance(version, bool) or version != VERSION:
        r.fail("version", f"{what} version {version!r}; this memplan reads version {VERSION}")


def read_problem(path: str | os.PathLike) -> Problem:
    """The problem in a memplan JSON file (or the problem part of a problem-and-plan file)."""
    document = _load(path)
    if isinstance(document, dict) and "problem" in document:  # a problem and its plan
        document = document["problem"]
    return problem_from_dict(document, source=str(path))


def read_plan(path: str | os.PathLike, problem: Problem) -> Plan:
    """The plan in a memplan JSON file, for ``problem`` (offsets matched by buffer id)."""
    document = _load(path)
    if isinstance(document, dict) and "plan" in document:
        document = document["plan"]
    return plan_from_dict(document, problem, source=str(path))


def write_problem(path: str | os.PathLike, problem: Problem) -> None:
    """Write ``problem`` as a memplan JSON file."""
    write_document(path, problem_to_dict(problem))


def write_plan(path: str | os.PathLike, problem: Problem, plan: Plan) -> None:
    """Write ``plan`` of ``problem`` as a memplan JSON file."""
    write_document(path, plan_to_dict(problem, plan))


def write_document(path: str | os.PathLike, document: dict[str, Any]) -> None:
    """Write a problem, a plan, or ``{"problem": ..., "plan": ...}`` (`json_text`),
    through a temporary file renamed over ``path``."""
    with open_replacing(path, "w") as handle:
        handle.write(json_text(document) + "\n")


LONG_LIST = 64  # a list longer than this is written an item a line, without looking inside


def json_text(document: dict[str, Any]) -> str:
    """``document`` as JSON text one can read and diff, every line written by json's C
    encoder, where ``json.dumps(indent=...)`` takes Python's (a problem and plan of 50k
    buffers: 0.17 CPU-s against 0.55; the 350k tensors at a peak of ``memplan explain``:
    1.4 against 3.8), which a command's time limit has to keep. The memplan JSON writer
    and ``memplan explain --json`` both write with it.

    - an object: a field a line;
    - a list of objects or lists: an item a line, each item on its one line, unless the
      list is short (`LONG_LIST`) and the item holds a long list (a peak and its
      tensors): then the item is laid out the same way, a level deeper;
    - anything else (numbers, strings, a list of them): one line."""
    return _laid_out(document, 0)


def _laid_out(value: Any, depth: int) -> str:
    if type(value) is int:
        return str(value)
    if isinstance(value, dict) and value:
        return _lines([f"{_KEY(str(key))}: {_laid_out(item, depth + 1)}"
                       for key, item in value.items()], "{}", depth)
    if isinstance(value, list | tuple) and any(isinstance(item, dict | list | tuple)
                                               for item in value):
        if len(value) <= LONG_LIST and any(map(_holds_long, value)):
            return _lines([_laid_out(item, depth + 1) for item in value], "[]", depth)
        return _item_a_line(value, depth)
    return _ENCODE(value)


def _holds_long(value: Any) -> bool:
    """Whether ``value`` is, or holds, a list longer than `LONG_LIST` (not looked into)."""
    if isinstance(value, dict):
        return any(map(_holds_long, value.values()))
    if isinstance(value, list | tuple):
        return len(value) > LONG_LIST or any(map(_holds_long, value))
    return False


def _item_a_line(items: list | tuple, depth: int) -> str:
    """``items`` an item a line. A list of objects (buffers, aliases, steps, tensors) is
    encoded in one call, then broken before each object that starts with the first one's
    key: in the encoder's output ``}, {"id": `` stands only between two objects (a quote
    inside a string is escaped), so only whitespace is added; 3x faster than a call an
    object."""
    if all(type(item) is dict for item in items) and items[0]:
        pad, key = " " * (depth + 1), _KEY(str(next(iter(items[0]))))
        text = _ENCODE(items)[1:-1].replace(f"}}, {{{key}: ", f"}},\n{pad}{{{key}: ")
        return f"[\n{pad}{text}\n{pad[1:]}]"
    return _lines(list(map(_ENCODE, items)), "[]", depth)


def _lines(lines: list[str], brackets: str, depth: int) -> str:
    pad = " " * (depth + 1)
    return f"{brackets[0]}\n{pad}" + f",\n{pad}".join(lines) + f"\n{pad[1:]}{brackets[1]}"


_ENCODE = json.JSONEncoder().encode  # the C encoder (no indent): ASCII, like json.dump
_KEY = json.encoder.encode_basestring_ascii
