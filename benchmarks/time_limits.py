"""``python -m benchmarks.time_limits``: does every planner keep its ``time_limit``?

The promise: a planner given ``time_limit=T`` returns within T + 10%,
at every size up to 100k buffers, cutting a pass that cannot finish (and
saying so in its stats). Steps:

- write each chosen problem of the ``large`` suite to a memplan JSON file
  (``--work``, shared with `benchmarks.scale_measure`);
- for every registered planner (or ``--planners``) and every limit, run
  ``plan_with(planner, problem, time_limit=T)`` in a fresh process, timing
  the call alone (the file is read before the clock starts), then validate
  the plan there;
- print one JSON line per run and a markdown table: seconds, seconds / T
  (over 1.1 in bold), arena / lower bound, units cut, the fallback taken,
  peak RSS, the load average.

    python -m benchmarks.time_limits --problems training-100k,network-100k --time-limit 1,5
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from benchmarks.scale_measure import problem_file
from benchmarks.suites import REPO

RUN = """
import json, resource, sys, time
from memplan import plan_with, validate
from memplan.formats.memplan_json import read_problem
problem = read_problem(sys.argv[1])
began = time.perf_counter()
plan = plan_with(sys.argv[2], problem, time_limit=float(sys.argv[3]))
seconds = time.perf_counter() - began
cut = plan.stats.get("cut", 0)
print(json.dumps(dict(
    seconds=seconds, ratio=plan.arena_size / plan.lower_bound, status=plan.status,
    valid=not validate(problem, plan), fallback=plan.stats.get("fallback"),
    cut=sum(cut.values()) if isinstance(cut, dict) else cut or 0,
    rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)))
"""


def run(path: Path, planner: str, limit: float, timeout: float) -> dict:
    """One planner on one problem file in a fresh process; ``error`` when it fails."""
    try:
        proc = subprocess.run([sys.executable, "-c", RUN, str(path), planner, str(limit)],
                              capture_output=True, text=True, cwd=REPO, timeout=timeout)
    except subprocess.TimeoutExpired:
        return dict(error=f"still running after {timeout:g} s: killed")
    if proc.returncode:
        return dict(error=(proc.stderr.strip().splitlines() or ["no output"])[-1])
    return json.loads(proc.stdout)


def main(argv: list[str] | None = None) -> int:
    from memplan import planners

    parser = argparse.ArgumentParser(prog="python -m benchmarks.time_limits",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--time-limit", default="1,5", help="comma-separated seconds")
    parser.add_argument("--problems", default="decoder-100k,training-100k,network-100k",
                        help="comma-separated large-suite names")
    parser.add_argument("--planners", default="all", help="comma-separated, or all")
    parser.add_argument("--work", type=Path, default=Path("/tmp/memplan-large"))
    args = parser.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    names = sorted(planners()) if args.planners == "all" else args.planners.split(",")
    rows = []
    for problem in args.problems.split(","):
        path = problem_file(args.work, problem)
        for limit in (float(t) for t in args.time_limit.split(",")):
            for planner in names:
                row = dict(problem=problem, planner=planner, limit=limit,
                           **run(path, planner, limit, timeout=10 * limit + 120),
                           load_average=os.getloadavg()[0])
                rows.append(row)
                print(json.dumps(row), flush=True)
    print("\n| problem | limit s | planner | seconds | seconds / limit | arena / bound | "
          "valid | units cut | fallback | peak RSS MB | load avg |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if "error" in r:
            print(f"| {r['problem']} | {r['limit']:g} | {r['planner']} | **{r['error']}** "
                  f"| | | | | | | {r['load_average']:.1f} |")
            continue
        share = r["seconds"] / r["limit"]
        shown = f"**{share:.2f}**" if share > 1.1 else f"{share:.2f}"
        print(f"| {r['problem']} | {r['limit']:g} | {r['planner']} | {r['seconds']:.2f} | "
              f"{shown} | {r['ratio']:.5f} | {'yes' if r['valid'] else '**NO**'} | "
              f"{r['cut']} | {r['fallback'] or '-'} | {r['rss_mb']} | "
              f"{r['load_average']:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
