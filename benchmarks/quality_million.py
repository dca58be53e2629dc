"""``python -m benchmarks.quality_million``: where `memplan.solve`'s time goes at 10^5-10^6 buffers.

`benchmarks.scale_measure` times the command a user types; this looks inside
one `memplan.api.solve_report` call per problem of the ``huge`` suite, in a
process of its own (so that its peak RSS is the call's), and prints per
stage what ran and what it reached:

- the problem: buffers, overlapping pairs of lifetimes (what every greedy
  pass meets, `memplan.registry.ceiling_fits`), and its long-lived buffers
  (living over ``--long`` of the schedule): how many, and their share of the
  load at the step that sets the bound;
- ``best``'s heuristics: their wall seconds, the passes run (arena over the
  bound) and skipped, the winner and the validation's seconds;
- the exact planner: the stage its part went to (neighbourhood windows: how
  many, how many improved), its seconds and the final arena over the bound;
- with ``--long-alone``: the long-lived buffers alone planned by ``best`` for that
  many seconds (their arena over their own bound): how hard the part that
  carries the peak is by itself.

Prints one JSON line per problem and the load average.

    python -m benchmarks.quality_million --problems network-1m --time-limit 60
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np

from benchmarks.suites import REPO, cases
from memplan.api import solve_report
from memplan.bounds import load_profile, lower_bound, time_overlap_count
from memplan.problem import Problem
from memplan.registry import plan_with


def measure(problem: Problem, limit: float, long_share: float = 0.01,
            alone: float = 0.0) -> dict:
    """One `solve_report` of ``problem`` within ``limit`` seconds, stage by stage (see the
    module doc); the long-lived buffers live over ``long_share`` of the schedule, and are
    planned alone for ``alone`` seconds (0: not)."""
    bound = lower_bound(problem)
    horizon = int(problem.ends.max()) - int(problem.starts.min())
    long = np.flatnonzero(problem.ends - problem.starts > long_share * horizon)
    times, loads = load_profile(problem)
    at = times[int(np.argmax(loads))]  # the step that sets the bound
    long_live = int(problem.sizes[long][(problem.starts[long] <= at) &
                                        (problem.ends[long] > at)].sum())
    row = dict(problem=problem.name, buffers=len(problem), limit=limit,
               pairs=time_overlap_count(problem.starts, problem.ends), long=len(long),
               long_share_of_bound=round(long_live / bound, 4))
    began = time.perf_counter()
    report = solve_report(problem, time_limit=limit)
    row["seconds"] = round(time.perf_counter() - began, 2)
    heuristic = report.heuristic
    stats = heuristic.stats
    row["heuristic"] = dict(
        seconds=round(heuristic.seconds, 2), ratio=round(heuristic.arena_size / bound, 6),
        winner=stats.get("winner"), skipped=len(stats.get("skipped", [])),
        cut=sorted(stats.get("cut", {})), validate_s=round(stats.get("validate_seconds", 0), 2),
        passes={k: round(v / bound, 5) for k, v in stats.get("arenas", {}).items()})
    if report.exact is not None:
        parts = report.exact.stats.get("parts_stats", [])
        row["exact"] = dict(seconds=round(report.exact.seconds, 2),
                            ratio=round(report.exact.arena_size / bound, 6),
                            windows=[p["lns"] for p in parts if "lns" in p],
                            stages=[sorted(p) for p in parts])
    else:
        row["exact"] = report.skipped_exact
    row["ratio"] = report.plan.arena_size / bound
    row["status"] = report.plan.status
    row["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    if alone and len(long):
        part = Problem.from_arrays(problem.sizes[long], problem.starts[long],
                                   problem.ends[long], alignments=problem.alignments[long])
        planned = plan_with("best", part, time_limit=alone)
        row["long_alone"] = dict(seconds=alone, ratio=planned.arena_size / lower_bound(part),
                                 winner=planned.stats.get("winner"))
    row["load_average"] = os.getloadavg()[0]
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.quality_million",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--problems", required=True, help="comma-separated names of the "
                                                          "huge suite")
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--long", type=float, default=0.01,
                        help="a buffer living over this share of the schedule is long-lived")
    parser.add_argument("--long-alone", type=float, default=0.0,
                        help="seconds for the long-lived buffers planned alone (0: not run)")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:  # the child: one problem, its JSON line
        case = next(c for c in cases("huge") if c.name == args.problems)
        row = measure(case.build(), args.time_limit, args.long, args.long_alone)
        print(json.dumps({**row, "problem": case.name}, default=str))
        return 0
    for name in args.problems.split(","):
        proc = subprocess.run([sys.executable, "-m", "benchmarks.quality_million", "--one",
                               "--problems", name, "--time-limit", str(args.time_limit),
                               "--long", str(args.long), "--long-alone", str(args.long_alone)],
                              capture_output=True, text=True, cwd=REPO)
        lines = proc.stdout.strip().splitlines()
        print(lines[-1] if proc.returncode == 0 and lines else json.dumps(
            dict(problem=name, error=(proc.stderr.strip().splitlines() or ["no output"])[-1])),
            flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
