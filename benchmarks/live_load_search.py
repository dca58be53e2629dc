"""Searching for a layout at (or near) the live load of MiniMalloc's D and J.

    python -m benchmarks.live_load_search --problem D --method restarts --height 963 --seconds 300
    python -m benchmarks.live_load_search --problem D --method packed --height 963 --seconds 420

Two experiments, one thread each (what they found: docs/explanation/open-problems.md);
heights in units of the sizes' greatest common divisor (1024 bytes on D and J), time as
the canonical search's section ranks (two buffers overlap in time if and only if they
share a section, so nothing is lost):

- ``restarts``: canonical fit probes (`memplan.solver.canonical`'s kernel, the spanning
  buffers taken out as in `memplan.solver.floors`) at the height, restarted every
  ``--per`` seconds with a new static order: the buffers' lifetimes or areas times
  log-normal noise (seeded). A probe that ends below its node limit without a layout
  would prove the height infeasible (it never did on D or J).
- ``packed``: a graded objective at a fixed height. Every buffer is optional; the state
  is a valid partial layout under the height (from the exact planner's best plan in
  ``--start-seconds``: its buffers that end below the height), scored by the area (size x
  sections) it packs. Each step frees the buffers that meet a time window around an
  unpacked buffer (up to a neighbourhood size, the highest or a random choice), fixes the
  rest, and maximises the packed area with CP-SAT (one worker, at most 2 s, hinted with the
  current state); the state moves when the area does not drop. All area packed is a layout
  at the height (checked by `memplan.validate`).

Cost: restarts, the kernel's nodes; packed, one CP-SAT model of a neighbourhood (its free
buffers and the packed ones that meet it) per step.
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import dataclass

import numpy as np
from ortools.sat.python import cp_model

from benchmarks.suites import MINIMALLOC_DIR
from memplan import Plan, Problem, plan_with, validate
from memplan.formats.minimalloc_csv import read_problem
from memplan.solver import canonical, floors
from memplan.solver.canonical import FOUND, NOT_FOUND


@dataclass
class Found:
    """What a search ended with (heights and layouts in the problem's own units)."""

    layout: np.ndarray | None  # a valid layout at the height, or None
    proven_infeasible: bool  # a restart exhausted its search: nothing fits at the height
    stats: dict


def whole(problem: Problem) -> floors.Relaxation:
    """``problem`` with time as section ranks and its spanning buffers out (exact)."""
    sections = len(canonical.sections(problem)[2])
    return floors.relax(problem, np.arange(sections), "whole")


def restarts(problem: Problem, height: int, seconds: float, per: float,
             seed: int = 0) -> Found:
    """Canonical fit probes at ``height`` with noisy static orders (see the module doc)."""
    rung = whole(problem)
    part, capacity = rung.problem, height - rung.lift
    first, end, _ = canonical.sections(part)
    rng = np.random.default_rng(seed)
    lifetimes = rung.widths.astype(np.float64)
    began, runs, nodes = time.perf_counter(), 0, 0
    while time.perf_counter() - began < seconds:
        runs += 1
        key = (lifetimes if runs % 2 else part.sizes * lifetimes) \
            * rng.lognormal(0.0, 0.3 if runs % 2 else 0.5, len(part))
        rank = np.argsort(np.argsort(key)).astype(np.int64) + 1  # the kernel's "W" key
        arrays = [np.ascontiguousarray(a, np.int64).tobytes()
                  for a in (part.sizes, first, end, part.alignments, rank)]
        left = min(per, seconds - (time.perf_counter() - began))
        code, raw, used = canonical._kernel_search(*arrays, "W", capacity, 1 << 60, left,
                                                   bytearray(1))
        nodes += used
        if code == FOUND:
            layout = floors.restore(problem, rung, np.frombuffer(raw, np.int64))
            return Found(layout, False, {"runs": runs, "nodes": nodes})
        if code == NOT_FOUND:
            return Found(None, True, {"runs": runs, "nodes": nodes})
    return Found(None, False, {"runs": runs, "nodes": nodes})


def packed(problem: Problem, height: int, start: np.ndarray, seconds: float, seed: int = 0,
           on_step=None) -> Found:
    """The packed-area search at ``height`` from the layout ``start`` (see the module doc)."""
    rung = whole(problem)
    part, capacity = rung.problem, height - rung.lift
    first, end, _ = canonical.sections(part)
    sizes = part.sizes.astype(np.int64)
    area = sizes * (end - first)
    offsets = np.asarray(start, np.int64)[rung.kept].copy()
    fits = (offsets + sizes <= capacity) & (sizes <= capacity)
    rng = np.random.default_rng(seed)
    total, current = int(area.sum()), int(area[fits].sum())
    stats = {"steps": 0, "start_missing": total - current}
    size, horizon = 50, int(end.max())
    began = time.perf_counter()
    while current < total and time.perf_counter() - began < seconds:
        stats["steps"] += 1
        out = np.flatnonzero(~fits & (sizes <= capacity))
        if not len(out):  # only buffers taller than the height are left out
            break
        target = int(rng.choice(out, p=area[out] / area[out].sum()))
        widen = int(rng.integers(0, 10))
        lo, hi = max(0, first[target] - widen), min(horizon, end[target] + widen)
        meets = np.flatnonzero((first < hi) & (end > lo))
        inside = meets[fits[meets]]
        if rng.random() < 0.5:
            inside = inside[np.argsort(-(offsets[inside] + sizes[inside]), kind="stable")]
        else:
            inside = rng.permutation(inside)
        free = np.union1d(inside[:size], meets[~fits[meets]])
        free = free[sizes[free] <= capacity]  # never empty: the target is in it
        left = seconds - (time.perf_counter() - began)
        result = _pack_window(part, first, end, capacity, offsets, fits, free, min(2.0, left),
                              int(rng.integers(1 << 30)))
        if result is None:
            size = max(10, int(size * 0.8))
            continue
        taken, placed, optimal = result
        new = current - int(area[free][fits[free]].sum()) + int(area[free][taken].sum())
        if new >= current:
            fits[free] = taken
            offsets[free[taken]] = placed[taken]
            if new > current and on_step is not None:
                on_step(time.perf_counter() - began, total - new, int((~fits).sum()))
            current = new
        size = min(len(part), int(size * 1.1) + 1) if optimal else max(10, int(size * 0.8))
    stats.update(missing=total - current, unpacked=int((~fits).sum()), total=total)
    if current < total:
        return Found(None, False, stats)
    return Found(floors.restore(problem, rung, offsets), False, stats)


def _pack_window(part, first, end, capacity, offsets, fits, free, seconds, seed):
    """(taken, offsets, optimal) of the free buffers maximising packed area; None: no answer."""
    model = cp_model.CpModel()
    lo, hi = int(first[free].min()), int(end[free].max())
    xs, ys, present, place, terms = [], [], [], [], []
    for b in free.tolist():
        size, width = int(part.sizes[b]), int(end[b] - first[b])
        take = model.new_bool_var("")
        y = model.new_int_var(0, capacity - size, "")
        xs.append(model.new_optional_fixed_size_interval_var(int(first[b]), width, take, ""))
        ys.append(model.new_optional_fixed_size_interval_var(y, size, take, ""))
        model.add_hint(take, bool(fits[b]))
        model.add_hint(y, int(offsets[b]) if fits[b] else 0)
        present.append(take)
        place.append(y)
        terms.append(size * width * take)
    is_free = np.zeros(len(part), bool)
    is_free[free] = True
    for b in np.flatnonzero(fits & ~is_free & (first < hi) & (end > lo)).tolist():
        xs.append(model.new_fixed_size_interval_var(int(first[b]), int(end[b] - first[b]), ""))
        ys.append(model.new_fixed_size_interval_var(int(offsets[b]), int(part.sizes[b]), ""))
    model.add_no_overlap_2d(xs, ys)
    model.maximize(sum(terms))
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = seed
    solver.parameters.max_time_in_seconds = max(seconds, 0.01)
    status = solver.solve(model)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    taken = np.array([bool(solver.value(t)) for t in present])
    placed = np.array([solver.value(y) for y in place], np.int64)
    return taken, placed, status == cp_model.OPTIMAL


def in_units(problem: Problem) -> tuple[Problem, int]:
    """``problem`` with sizes divided by their greatest common divisor (alignments 1 only)."""
    if (problem.alignments != 1).any():
        raise ValueError("experiments on unaligned problems only")
    unit = int(np.gcd.reduce(problem.sizes))
    return Problem.from_arrays(problem.sizes // unit, problem.starts, problem.ends), unit


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--problem", default="D", help="a MiniMalloc problem name (A..K)")
    parser.add_argument("--method", choices=("restarts", "packed"), default="restarts")
    parser.add_argument("--height", type=int, default=0, help="units; 0 = the live load")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--per", type=float, default=3.0, help="restarts: seconds a probe")
    parser.add_argument("--start-seconds", type=float, default=60.0,
                        help="packed: the exact planner's time for the start (one worker)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    original = read_problem(MINIMALLOC_DIR / f"{args.problem}.1048576.csv", capacity=None)
    problem, unit = in_units(original)
    live = int(canonical.sections(problem)[2].max())
    height = args.height or live
    print(f"{args.problem}: {len(problem)} buffers, live load {live} units of {unit} B, "
          f"height {height}", flush=True)
    if args.method == "restarts":
        found = restarts(problem, height, args.seconds, args.per, args.seed)
    else:
        start = plan_with("exact", problem, time_limit=args.start_seconds, threads=1).offsets
        print(f"start: peak {int((start + problem.sizes).max())} units", flush=True)
        found = packed(problem, height, start, args.seconds, args.seed,
                       on_step=lambda t, missing, out: print(
                           f"{t:7.1f} s: missing area {missing}, unpacked {out}", flush=True))
    verdict = "infeasible (exhausted)" if found.proven_infeasible else "unknown"
    if found.layout is not None:
        plan = Plan.from_offsets(original, found.layout * unit, planner=args.method)
        verdict = "INVALID" if validate(original, plan) else f"layout at {plan.arena_size} B"
    print(f"{args.problem} at {height} units ({height * unit} B): {verdict}; {found.stats}")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
