"""The exact planner on tilings: ``python -m benchmarks.tilings``.

omnimalloc's pinwheel (non-guillotine) and tiling (guillotine) sources, seeded,
each also time-reversed, at capacity = their live load: every step is exactly
full, so the only layouts that fit are tilings. Each problem is planned in a
fresh process, by the exact planner (`memplan.plan_with`) or, with ``--order``,
by the canonical kernel alone in that one static order; the table gives the
status, the planner's seconds (nodes for the kernel alone), and the whole
process's wall seconds and peak resident memory. Needs the ``peers`` extra.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

from benchmarks.suites import REPO


def tiling(kind: str, n: int, seed: int, reverse: bool):
    """omnimalloc's ``kind`` source with ``n`` buffers and ``seed``, time-reversed if asked."""
    from omnimalloc.benchmark.sources.pinwheel import PinwheelSource
    from omnimalloc.benchmark.sources.tiling import TilingSource

    from memplan.problem import Problem

    source = (PinwheelSource if kind == "pinwheel" else TilingSource)(num_allocations=n,
                                                                       seed=seed)
    made = source.get_allocations()
    starts = np.array([a.start for a in made])
    ends = np.array([a.end for a in made])
    if reverse:
        starts, ends = ends.max() - ends, ends.max() - starts
    return Problem.from_arrays([a.size for a in made], starts, ends,
                               capacity=source.memory_capacity,
                               name=f"{kind}-{n}-s{seed}{'-reversed' if reverse else ''}")


def one(kind: str, n: int, seed: int, reverse: bool, limit: float, order: str | None) -> dict:
    """Plan one tiling in this process; what the table shows of it."""
    from memplan import plan_with, validate
    from memplan.solver import canonical

    problem = tiling(kind, n, seed, reverse)
    began = time.perf_counter()
    if order is None:
        plan = plan_with("exact", problem, time_limit=limit)
        status, offsets, work = plan.status, plan.offsets, ""
    else:
        race = canonical.Race(problem, problem.capacity, orders=(order,), sweeps=())
        race.start(1, limit)
        canonical.wait(race, None, None)
        race.cancel()
        verdict = race.result()
        status, offsets, work = verdict.status, verdict.offsets, f"{verdict.stats['nodes']} nodes"
    seconds = time.perf_counter() - began
    if offsets is not None:  # checked by the independent validator
        from memplan.plan import Plan

        checked = Plan.from_offsets(problem, offsets, planner=order or "exact")
        if validate(problem, checked):
            raise AssertionError(f"{problem.name}: invalid layout: {validate(problem, checked)}")
    return {"problem": problem.name, "status": status, "seconds": seconds, "work": work}


def _run(line: list[str]) -> tuple[dict, float, float]:
    """Run ``line``: its JSON line, wall seconds, peak resident MB."""
    began = time.perf_counter()
    child = subprocess.Popen(line, cwd=REPO, stdout=subprocess.PIPE, text=True)
    out = child.stdout.read()
    _, status, usage = os.wait4(child.pid, 0)  # reaped here, with its resource usage
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode:
        raise RuntimeError(f"{' '.join(line)} exited with {child.returncode}")
    return json.loads(out), time.perf_counter() - began, usage.ru_maxrss / 1024


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.tilings", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kind", default="pinwheel,tiling")
    parser.add_argument("--sizes", default="501,1001,2001")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--variant", default="original,reversed")
    parser.add_argument("--time-limit", type=float, default=30.0)
    parser.add_argument("--order", help="the canonical kernel alone, in this static order")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    runs = [(kind, int(n), int(seed), variant == "reversed")
            for kind in args.kind.split(",") for n in args.sizes.split(",")
            for seed in args.seeds.split(",") for variant in args.variant.split(",")]
    if args.one:
        print(json.dumps(one(*runs[0], args.time_limit, args.order)))
        return 0
    print("| problem | status | planner s | whole s | MB |\n|---|---|---|---|---|")
    for kind, n, seed, reverse in runs:
        line = [sys.executable, "-m", "benchmarks.tilings", "--one", "--kind", kind,
                "--sizes", str(n), "--seeds", str(seed),
                "--variant", "reversed" if reverse else "original",
                "--time-limit", f"{args.time_limit:g}"] + \
            (["--order", args.order] if args.order else [])
        row, wall, memory = _run(line)
        print(f"| {row['problem']} | {row['status']} | {row['seconds']:.3f} {row['work']} | "
              f"{wall:.2f} | {memory:.0f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
