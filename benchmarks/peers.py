"""memplan side by side with other planners: whole processes, one run, same machine.

``python -m benchmarks peers`` times every peer as a user would run it, as
a whole process from start to exit (interpreter start-up and imports
included), on the same problem files, one after the other, problem by
problem, so that every ratio compares runs made at the same moment:

- ``memplan``: ``memplan solve X.csv --capacity C --time-limit T --csv out.csv
  --quiet`` (``--capacity none`` to minimise);
- ``minimalloc``: MiniMalloc's C++ binary (google/minimalloc, built from
  source outside the repository), given by ``--minimalloc PATH`` or the
  ``MEMPLAN_MINIMALLOC`` environment variable: ``--capacity=C --input=X
  --output=out.csv --timeout=Ts`` (to minimise: ``--minimize_capacity``, its
  bisection below C);
- ``supermalloc`` and ``tabu``: omnimalloc's SuperMalloc (a portfolio
  branch and bound that minimises the peak) and tabu search, from the
  optional ``peers`` extra (``pip install -e ".[peers]"``), each with the
  time limit, in a process of `benchmarks.omnimalloc_peer`.

Steps: compile memplan's bytecode (as an installed package has it); write
each problem (and each variant: ``reversed`` mirrors time, ``relabelled``
shuffles rows and renames buffers, seeded) as a MiniMalloc CSV; for each
repetition, run every peer on it in turn; read the solution file back and
check it with `memplan.validate` against the problem (a solution that
breaks it is ``INVALID``; one above the capacity in fit mode ``no fit``). A
peer that is not installed gets rows that say so. The table gives medians
over the repetitions, ``memplan / MiniMalloc`` per problem and the geometric
mean of those ratios.
"""

from __future__ import annotations

import compileall
import csv
import json
import math
import os
import shlex
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.suites import REPO, cases
from memplan.formats.minimalloc_csv import write_csv
from memplan.problem import Problem

PEERS = ("memplan", "minimalloc", "supermalloc", "tabu")
VARIANTS = ("original", "reversed", "relabelled")
MINIMALLOC_ENV = "MEMPLAN_MINIMALLOC"
GRACE = 30.0  # seconds a peer may overrun its time limit before it is killed


def reversed_problem(problem: Problem) -> Problem:
    """Time mirrored: ``[start, end)`` becomes ``[T - end, T - start)``."""
    horizon = int(problem.ends.max())
    return Problem.from_arrays(problem.sizes, horizon - problem.ends, horizon - problem.starts,
                               ids=problem.ids, alignments=problem.alignments,
                               capacity=problem.capacity, name=f"{problem.name}-reversed")


def relabelled_problem(problem: Problem, seed: int = 0) -> Problem:
    """Rows shuffled (seeded) and buffers renamed ``r0, r1, ...`` in the new order."""
    order = np.random.default_rng(seed).permutation(len(problem))
    return Problem.from_arrays(problem.sizes[order], problem.starts[order], problem.ends[order],
                               ids=[f"r{i}" for i in range(len(problem))],
                               alignments=problem.alignments[order], capacity=problem.capacity,
                               name=f"{problem.name}-relabelled")


def variant(problem: Problem, name: str) -> Problem:
    if name == "original":
        return problem
    if name == "reversed":
        return reversed_problem(problem)
    if name == "relabelled":
        return relabelled_problem(problem)
    raise KeyError(f"unknown variant {name!r}; valid: {', '.join(VARIANTS)}")


def minimalloc_binary(given: str | None) -> str | None:
    """The MiniMalloc binary: ``given``, else ``$MEMPLAN_MINIMALLOC``; None if neither is one."""
    path = given or os.environ.get(MINIMALLOC_ENV)
    if path and Path(path).is_file() and os.access(path, os.X_OK):
        return path
    return None


def omnimalloc_missing() -> str | None:
    """Why omnimalloc's peers cannot run here (None when they can)."""
    try:
        import omnimalloc  # noqa: F401
    except ImportError:
        return 'omnimalloc is not installed (pip install -e ".[peers]")'
    return None


def _memplan_command(path: Path, out: Path, capacity: int | None, limit: float) -> list[str]:
    script = Path(sys.executable).with_name("memplan")
    head = [str(script)] if script.is_file() else [sys.executable, "-m", "memplan.cli"]
    return head + ["solve", str(path), "--capacity", "none" if capacity is None else
                   str(capacity), "--time-limit", f"{limit:g}", "--csv", str(out), "--quiet"]


def command(peer: str, path: Path, out: Path, capacity: int, limit: float, *,
            minimise: bool, minimalloc: str | None) -> list[str]:
    """The command line that runs ``peer`` on the problem file ``path``."""
    if peer == "memplan":
        return _memplan_command(path, out, None if minimise else capacity, limit)
    if peer == "minimalloc":
        return [minimalloc, f"--capacity={capacity}", f"--input={path}", f"--output={out}",
                f"--timeout={limit:g}s"] + (["--minimize_capacity"] if minimise else [])
    return [sys.executable, "-m", "benchmarks.omnimalloc_peer", peer, str(path), str(out),
            f"{limit:g}"]


def judge(problem: Problem, out: Path, *, fit: bool) -> tuple[str, int | None, str | None]:
    """(status, arena, note) of a peer's solution file, checked by the validator."""
    from memplan.plan import Plan
    from memplan.validate import validate

    if not out.is_file():
        return "no plan", None, "no solution file"
    with out.open(newline="") as handle:
        offsets = {row["id"]: int(row["offset"]) for row in csv.DictReader(handle)
                   if row.get("offset") not in (None, "")}
    missing = [i for i in problem.ids if i not in offsets]
    if missing:
        return "no plan", None, f"{len(missing)} buffers without an offset"
    plan = Plan.from_offsets(problem.replace(capacity=None),
                             [offsets[i] for i in problem.ids], planner="peer")
    violations = validate(problem.replace(capacity=None), plan)
    if violations:
        return "INVALID", plan.arena_size, str(violations[0])
    if fit and problem.capacity is not None and plan.arena_size > problem.capacity:
        return "no fit", plan.arena_size, None
    return "fits" if fit else "valid", plan.arena_size, None


def run_one(peer: str, problem: Problem, path: Path, out: Path, limit: float, *,
            minimise: bool, minimalloc: str | None) -> dict[str, Any]:
    """One whole-process run of ``peer``; its wall time and its checked solution."""
    if out.exists():
        out.unlink()
    argv = command(peer, path, out, int(problem.capacity), limit, minimise=minimise,
                   minimalloc=minimalloc)
    began = time.perf_counter()
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=limit + GRACE,
                              cwd=REPO)
    except subprocess.TimeoutExpired:
        return dict(status="TIMEOUT", seconds=time.perf_counter() - began, arena=None,
                    note=f"killed after {limit + GRACE:g} s")
    seconds = time.perf_counter() - began
    status, arena, note = judge(problem, out, fit=not minimise)
    if status == "no plan" and done.returncode != 0:
        tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-2:])
        note = f"exit {done.returncode}: {tail}"[:200]
    return dict(status=status, seconds=seconds, arena=arena, note=note)


def run(suite: str, problems: tuple[str, ...], variants: tuple[str, ...], peers: tuple[str, ...],
        *, mode: str, limit: float, repeat: int, minimalloc: str | None, out_dir: Path,
        omnimalloc_limit: float | None = None, progress=print) -> list[dict[str, Any]]:
    """Every (problem, variant) x repetition x peer; one row per run (see the module doc)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    # an installed package has its bytecode compiled; a checkout run with
    # PYTHONDONTWRITEBYTECODE would compile every module in every timed process
    compileall.compile_dir(REPO / "memplan", quiet=1)
    compileall.compile_dir(REPO / "benchmarks", quiet=1)
    missing = {"minimalloc": None if minimalloc else
               f"MiniMalloc binary not given (--minimalloc PATH or ${MINIMALLOC_ENV})"}
    why = omnimalloc_missing()
    missing.update(supermalloc=why, tabu=why)
    raw = out_dir / "raw.jsonl"
    raw.write_text("")
    rows = []
    for case in cases(suite):
        if (problems and case.name not in problems) or not case.has_capacity:
            continue  # MiniMalloc's format and binary need a capacity
        base = case.problem("fit")
        for name in variants:
            problem = variant(base, name)
            label = case.name if name == "original" else f"{case.name}-{name}"
            path = out_dir / "problems" / f"{label}.{base.capacity}.csv"
            path.parent.mkdir(exist_ok=True)
            write_csv(path, problem)
            for run_index in range(repeat):
                for peer in peers:
                    if missing.get(peer):
                        result = dict(status="missing", seconds=None, arena=None,
                                      note=missing[peer])
                    else:
                        seconds = limit if peer in ("memplan", "minimalloc") or \
                            omnimalloc_limit is None else omnimalloc_limit
                        result = run_one(peer, problem, path, out_dir / f"{peer}.csv", seconds,
                                         minimise=mode == "minimise", minimalloc=minimalloc)
                    result.update(problem=label, peer=peer, run=run_index, mode=mode,
                                  capacity=int(base.capacity), buffers=len(problem))
                    rows.append(result)
                    with raw.open("a") as handle:
                        handle.write(json.dumps(result) + "\n")
                    shown = "—" if result["seconds"] is None else f"{result['seconds']:.2f} s"
                    progress(f"{label} {peer} #{run_index + 1}: {result['status']} "
                             f"{result['arena']} {shown}")
    return rows


def summarise(rows: list[dict[str, Any]], peers: tuple[str, ...]) -> list[dict[str, Any]]:
    """One row per problem: each peer's median seconds, status and arena; the ratio."""
    table: dict[str, dict[str, Any]] = {}
    for row in rows:
        entry = table.setdefault(row["problem"], {"problem": row["problem"],
                                                  "buffers": row["buffers"]})
        entry.setdefault(row["peer"], []).append(row)
    summary = []
    for entry in table.values():
        line = {"problem": entry["problem"], "buffers": entry["buffers"]}
        for peer in peers:
            runs = entry.get(peer, [])
            times = [r["seconds"] for r in runs if r["seconds"] is not None]
            statuses = sorted({r["status"] for r in runs})
            arenas = [r["arena"] for r in runs if r["arena"] is not None]
            line[peer] = dict(seconds=statistics.median(times) if times else None,
                              status="/".join(statuses) or "—",
                              arena=statistics.median_low(arenas) if arenas else None,
                              note=next((r["note"] for r in runs if r.get("note")), None))
        mine, theirs = line.get("memplan", {}), line.get("minimalloc", {})
        line["ratio"] = (mine["seconds"] / theirs["seconds"]
                         if mine.get("seconds") and theirs.get("seconds") else None)
        summary.append(line)
    return summary


def geometric_mean(values: list[float]) -> float | None:
    values = [v for v in values if v]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def markdown(summary: list[dict[str, Any]], peers: tuple[str, ...], *, fit: bool) -> str:
    """The table: per peer its median wall seconds and verdict; memplan / MiniMalloc."""
    head = ["problem", "buffers"]
    for peer in peers:
        head += [f"{peer} s", f"{peer} {'fit' if fit else 'arena'}"]
    head.append("memplan / MiniMalloc")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    notes = {}
    for line in summary:
        cells = [line["problem"], str(line["buffers"])]
        for peer in peers:
            cell = line[peer]
            seconds = "—" if cell["seconds"] is None else f"{cell['seconds']:.2f}"
            verdict = cell["status"] if fit or cell["arena"] is None else str(cell["arena"])
            if fit and cell["arena"] is not None and cell["status"] == "no fit":
                verdict = f"no fit ({cell['arena']})"
            if cell["note"] and cell["status"] in ("missing", "INVALID", "TIMEOUT", "no plan"):
                notes.setdefault(cell["note"], len(notes) + 1)
                verdict += f" [{notes[cell['note']]}]"
            cells += [seconds, verdict]
        cells.append("—" if line["ratio"] is None else f"{line['ratio']:.2f}")
        lines.append("| " + " | ".join(cells) + " |")
    mean = geometric_mean([line["ratio"] for line in summary if line["ratio"]])
    worst = max((line["ratio"] for line in summary if line["ratio"]), default=None)
    lines.append("")
    if mean is not None:
        lines.append(f"Geometric mean of memplan / MiniMalloc: {mean:.2f}; largest ratio "
                     f"{worst:.2f}.")
    for note, number in notes.items():
        lines.append(f"[{number}] {note}")
    return "\n".join(lines) + "\n"


def main(args) -> int:
    """``python -m benchmarks peers``: see `benchmarks.__main__`."""
    from benchmarks import report

    minimalloc = minimalloc_binary(args.minimalloc)
    if args.minimalloc and minimalloc is None:
        sys.exit(f"error: no executable MiniMalloc binary at {args.minimalloc}")
    load = "load average (1, 5, 15 min)"
    before = report.machine()[load]
    rows = run(args.suite, args.problem, args.variant, args.peer, mode=args.mode,
               limit=args.time_limit, repeat=args.repeat, minimalloc=minimalloc,
               out_dir=args.out, omnimalloc_limit=args.omnimalloc_time_limit,
               progress=lambda line: print(line, file=sys.stderr))
    summary = summarise(rows, args.peer)
    table = markdown(summary, args.peer, fit=args.mode == "fit")
    info = report.machine()
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    text = (f"Run {stamp} at commit {info['memplan commit']}; load average (1, 5, 15 min) "
            f"before {before}, after {info[load]}; {args.repeat} run(s) per peer and problem, "
            f"medians of whole-process wall seconds; mode {args.mode}, time limit "
            f"{args.time_limit:g} s"
            + ("" if args.omnimalloc_time_limit is None else
               f" ({args.omnimalloc_time_limit:g} s for omnimalloc's planners)")
            + ".\n\n" + table)
    (args.out / "results.md").write_text(text)
    print(text)
    if args.section:
        command_line = "python -m benchmarks " + shlex.join(args.argv)
        report.update_section(args.doc, args.section,
                              f"Command: `{command_line}`  \n{text}", command_line)
        report.update_section(args.doc, "machine", report.machine_markdown(info),
                              "python -m benchmarks machine --section machine")
    invalid = any(r["status"] == "INVALID" for r in rows)
    return 2 if invalid else 0
