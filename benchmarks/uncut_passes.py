"""``python -m benchmarks.uncut_passes``: the work no time limit cuts, pass by pass.

`memplan.solve` keeps its limit only if what must run whatever the limit fits
inside it: the lower bound, the split into parts (`memplan.parts`), the alias
units, the ceiling plan (the time sweep where `greedy_by_size` would not fit:
`memplan.registry.ceiling_fits`) and the validation of the plan returned. This
times each pass in CPU seconds (the figure a busy machine does not inflate
much) on the ``huge`` suite's generated problems, then ``memplan.solve`` at
the given limits (wall and CPU), and prints a markdown table with the load::

    python -m benchmarks.uncut_passes --problems network-100k,training-1m --time-limit 5

One process, one problem at a time; the problem is generated first (not
timed). Peak RSS is the process's, after the problem's own.
"""

from __future__ import annotations

import argparse
import os
import resource
import time

from benchmarks.suites import find_case


def _cpu(fn):
    """(result, CPU seconds) of ``fn()``."""
    began = time.process_time()
    result = fn()
    return result, time.process_time() - began


def measure(name: str, limits: list[float]) -> list[str]:
    """The table rows of one problem of the ``huge`` suite."""
    import memplan
    from memplan import lower_bound, validate
    from memplan.heuristics import time_sweep
    from memplan.heuristics.units import Units
    from memplan.parts import groups

    problem = find_case("huge", name).problem("minimise")
    bound, bound_s = _cpu(lambda: lower_bound(problem))
    parts, parts_s = _cpu(lambda: groups(problem))
    _, units_s = _cpu(lambda: Units.build(problem, pairs=False))
    ceiling, sweep_s = _cpu(lambda: time_sweep.plan(problem))
    found, validate_s = _cpu(lambda: validate(problem, ceiling))
    assert not found, found[:3]
    passes = bound_s + parts_s + units_s + sweep_s + validate_s
    rows = []
    for limit in limits:
        wall, cpu = time.perf_counter(), time.process_time()
        plan = memplan.solve(problem, time_limit=limit)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
        rows.append(f"| {name} | {len(problem):,} | {len(parts)} | {bound_s:.2f} | {parts_s:.2f} "
                    f"| {units_s:.2f} | {sweep_s:.2f} | {validate_s:.2f} | {passes:.2f} "
                    f"| {limit:g} | {wall:.2f} | {cpu:.2f} | {plan.arena_size / bound:.5f} "
                    f"| {rss} | {os.getloadavg()[0]:.1f} |")
        print(rows[-1], flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--problems", required=True, help="comma-separated names of the "
                                                          "huge suite (network-1m, ...)")
    parser.add_argument("--time-limit", default="5", help="comma-separated seconds")
    args = parser.parse_args(argv)
    limits = [float(x) for x in args.time_limit.split(",")]
    print("| problem | buffers | parts | bound | parts | units | sweep | validate | uncut CPU s "
          "| limit s | solve wall s | solve CPU s | arena / bound | peak MB | load |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|")
    for name in args.problems.split(","):
        measure(name, limits)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
