"""The exact planner on tilings: ``python -m benchmarks.tilings``.

omnimalloc's pinwheel (non-guillotine) and tiling (guillotine) sources, seeded,
each also time-reversed (``--variant``, as `benchmarks.peers.variant`), at
capacity = their live load: every step is exactly full, so the only layouts
that fit are tilings. Each problem is planned in a
fresh process, by the exact planner (`memplan.plan_with`) or, with ``--order``,
by the canonical kernel alone in that one static order; the table gives the
status, the planner's seconds (nodes for the kernel alone), and the whole
process's wall seconds and peak resident memory. Needs the ``peers`` extra.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from benchmarks.heuristic_search import timed
from benchmarks.peers import variant
from benchmarks.regress import tiling
from benchmarks.suites import REPO


def one(kind: str, n: int, seed: int, copy: str, limit: float, order: str | None) -> dict:
    """Plan one tiling in this process; what the table shows of it."""
    from memplan import plan_with, validate
    from memplan.plan import Plan
    from memplan.solver import canonical

    problem = variant(tiling(kind, n, seed), copy)  # "original", "reversed", "relabelled"
    began = time.perf_counter()
    if order is None:
        plan = plan_with("exact", problem, time_limit=limit)
        status, offsets, work = plan.status, plan.offsets, ""
    else:
        verdict = canonical.fit(problem, seconds=limit, threads=1, orders=(order,), sweeps=())
        status, offsets, work = verdict.status, verdict.offsets, f"{verdict.stats['nodes']} nodes"
    seconds = time.perf_counter() - began
    if offsets is not None:  # checked by the independent validator
        errors = validate(problem, Plan.from_offsets(problem, offsets, planner=order or "exact"))
        if errors:
            raise AssertionError(f"{problem.name}: invalid layout: {errors}")
    return {"problem": problem.name, "status": status, "seconds": seconds, "work": work}


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
    runs = [(kind, int(n), int(seed), copy)
            for kind in args.kind.split(",") for n in args.sizes.split(",")
            for seed in args.seeds.split(",") for copy in args.variant.split(",")]
    if args.one:
        print(json.dumps(one(*runs[0], args.time_limit, args.order)))
        return 0
    print("| problem | status | planner s | whole s | MB |\n|---|---|---|---|---|")
    for kind, n, seed, copy in runs:
        line = [sys.executable, "-m", "benchmarks.tilings", "--one", "--kind", kind,
                "--sizes", str(n), "--seeds", str(seed), "--variant", copy,
                "--time-limit", f"{args.time_limit:g}"] + \
            (["--order", args.order] if args.order else [])
        wall, memory, output = timed(line, REPO)
        if not output:
            raise RuntimeError(f"{' '.join(line)} printed no result (it failed)")
        row = json.loads(output)
        print(f"| {row['problem']} | {row['status']} | {row['seconds']:.3f} {row['work']} | "
              f"{wall:.2f} | {memory:.0f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
