"""The floor ladder (`memplan.solver.floors`) on MiniMalloc's problems, probe by probe.

    python -m benchmarks.floors_ladder --problem D,J --seconds 5 [--above 0]

For each problem's largest part (sizes in units of the part's scale): every
relaxation on the ladder at the live-load bound (plus ``--above`` units),
probed alone by the canonical search on one thread for at most ``--seconds``:
its buffers, the spanning buffers' units taken out, the verdict (feasible:
a layout at that height; infeasible: a proof that the problem's optimum is
higher; unknown: the time ran out), nodes and seconds. A Markdown table on
standard output, with the load average before and after.
"""

from __future__ import annotations

import argparse
import os
import time

from benchmarks.suites import MINIMALLOC_DIR
from memplan.bounds import lower_bound
from memplan.formats.minimalloc_csv import read_problem
from memplan.solver import canonical, floors
from memplan.solver.preprocess import split


def ladder_rows(name: str, seconds: float, above: int) -> list[str]:
    problem = read_problem(MINIMALLOC_DIR / f"{name}.1048576.csv", capacity=None)
    part = max(split(problem), key=lambda p: len(p.buffers))
    height = lower_bound(problem) // part.scale + above
    widths = problem.ends[part.buffers] - problem.starts[part.buffers]
    rows = []
    for rung in floors.ladder(part.problem, height, widths):
        race = canonical.Race(rung.problem, height - rung.lift, widths=rung.widths)
        began = time.perf_counter()
        race.start(1, seconds)
        canonical.wait(race, None, None)
        race.cancel()
        verdict = race.result()
        rows.append(f"| {name} | {height} | {rung.name} | {len(rung.problem)} | {rung.lift} | "
                    f"{verdict.status} | {verdict.stats['nodes']} | "
                    f"{time.perf_counter() - began:.1f} |")
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--problem", default="D,J", help="comma-separated names (A..K)")
    parser.add_argument("--seconds", type=float, default=5.0, help="most seconds a probe")
    parser.add_argument("--above", type=int, default=0,
                        help="probe this many units above the live-load bound")
    args = parser.parse_args(argv)
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("| problem | height (units) | relaxation | buffers | spanning units out | verdict "
          "| nodes | seconds |")
    print("|---|---:|---|---:|---:|---|---:|---:|")
    for name in args.problem.split(","):
        for row in ladder_rows(name.strip(), args.seconds, args.above):
            print(row, flush=True)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
