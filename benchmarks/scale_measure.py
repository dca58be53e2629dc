"""``python -m benchmarks.scale_measure``: the ``large`` suite timed as a user runs it.

The runner (`benchmarks.runner`) times planners; this times the command a
user types, ``memplan solve FILE --time-limit T --json``, in a fresh process,
so that its wall clock (file loading included), its peak resident memory and
its plan are what a user gets. Steps:

- write each chosen problem of the ``large`` suite to a memplan JSON file
  (``--work``, built once and reused: the generators are seeded);
- run ``memplan solve`` under ``/usr/bin/time`` (peak RSS) for each time
  limit; read its JSON summary: arena, lower bound, status, solve seconds;
  the loading time is the wall clock less the solve seconds;
- optionally the peer, omnimalloc's SuperMalloc (``pip install omnimalloc``),
  on the same buffers with the same time limit and 2 threads, in a process
  of its own; its plan is checked by memplan's validator (aliases and
  alignment aside: omnimalloc has neither, so it may share less and align
  nothing);
- optionally (``--before``) another installation's ``memplan`` (a venv of an
  earlier commit: ``git archive COMMIT | tar -x -C DIR``, a venv in DIR,
  ``pip install -e DIR``) on the same file right after, for a before/after
  table measured side by side;
- print one JSON line per run and a markdown table, with the load average.

    python -m benchmarks.scale_measure --time-limit 5,60 --problems network-10k,training-10k \\
        --peer network-10k --before /tmp/before/.venv/bin/memplan
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.suites import REPO, cases

PEER = """
import json, sys, time
import numpy as np
from memplan.formats.memplan_json import read_problem
from memplan.plan import Plan
from memplan.validate import validate
from omnimalloc import Allocation, allocate
from omnimalloc.allocators import SupermallocAllocator
problem = read_problem(sys.argv[1])
began = time.perf_counter()
allocations = [Allocation(i, int(s), int(a), int(b)) for i, (s, a, b) in
               enumerate(zip(problem.sizes, problem.starts, problem.ends))]
placed = allocate(allocations, SupermallocAllocator(timeout=float(sys.argv[2]), num_threads=2))
seconds = time.perf_counter() - began
offsets = np.zeros(len(problem), np.int64)
for a in placed:
    offsets[a.id] = a.offset
plan = Plan.from_offsets(problem, offsets, planner="supermalloc")
kinds = sorted({v.kind for v in validate(problem, plan)})
print(json.dumps(dict(arena=plan.arena_size, seconds=seconds, violations=kinds)))
"""


def problem_file(work: Path, name: str) -> Path:
    from memplan.formats.memplan_json import write_problem

    path = work / f"{name}.json"
    if not path.exists():
        case = next(c for c in cases("large") + cases("huge") if c.name == name)
        write_problem(path, case.build())
    return path


def _solve(path: Path, limit: float, memplan: Path | None = None) -> dict:
    # this checkout's memplan (the one beside sys.executable may be another venv's)
    command = [str(memplan)] if memplan else [sys.executable, "-m", "memplan.cli"]
    proc = subprocess.run(["/usr/bin/time", "-f", "%e %M %U %S", *command, "solve", str(path),
                           "--time-limit", str(limit), "--json"],
                          capture_output=True, text=True, cwd=REPO)
    if proc.returncode not in (0, 1):  # 1: does not fit a capacity (still a summary)
        return dict(error=(proc.stderr.strip().splitlines() or ["no output"])[-1])
    wall, rss_kb, user, system = proc.stderr.strip().splitlines()[-1].split()
    said = [line for line in proc.stderr.splitlines() if "beyond --time-limit" in line]
    summary = json.loads(proc.stdout)
    bound = summary["lower_bound"]
    return dict(buffers=summary["buffers"], wall=float(wall), solve_s=summary["seconds"],
                cpu=float(user) + float(system), warned=bool(said),
                load_s=float(wall) - summary["seconds"], rss_mb=int(rss_kb) // 1024,
                heuristic=summary["heuristic"]["arena_size"] / bound,
                ratio=summary["plan"]["arena_size"] / bound, status=summary["plan"]["status"],
                lower_bound=bound)


PEER_MEMORY = 6 << 30  # bytes the peer may map (the machine is shared): past it, "not finished"
PEER_WAIT = (2, 60)  # the peer is stopped after 2x its limit + 60 s: "not finished"


def _peer(path: Path, limit: float, bound: int) -> dict:
    """SuperMalloc on the problem of ``path``, in a process of its own within `PEER_MEMORY`
    and `PEER_WAIT` (its timeout is not kept on large problems: 67 s at a limit of 5 on
    80k buffers, and 12 GB and 12 minutes without an end on a 100k-buffer training step)."""
    began = time.perf_counter()
    wait = PEER_WAIT[0] * limit + PEER_WAIT[1]
    proc = subprocess.Popen(
        ["/usr/bin/time", "-f", "%M", sys.executable, "-c", PEER, str(path), str(limit)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
        start_new_session=True,  # its own group: stopped whole, the peer with its timer
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (PEER_MEMORY,) * 2))
    try:
        stdout, stderr = proc.communicate(timeout=wait)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return dict(peer_error=f"not finished in {wait:g} s")
    if "MemoryError" in stderr or "bad_alloc" in stderr:
        return dict(peer_error=f"out of {PEER_MEMORY >> 30} GB")
    said = stderr.strip().splitlines() or [f"exit code {proc.returncode}"]
    if proc.returncode:
        return dict(peer_error=said[-2] if said[-1].isdigit() and len(said) > 1 else said[-1])
    found = json.loads(stdout)
    return dict(peer_ratio=found["arena"] / bound, peer_s=found["seconds"],
                peer_wall=time.perf_counter() - began, peer_violations=found["violations"],
                peer_rss_mb=int(said[-1]) // 1024)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.scale_measure",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--time-limit", default="60", help="comma-separated seconds")
    parser.add_argument("--problems", required=True, help="comma-separated names of the "
                                                          "large or huge suite")
    parser.add_argument("--peer", default="", help="comma-separated problems (or 'all') to run "
                                                   "omnimalloc's SuperMalloc on too")
    parser.add_argument("--work", type=Path, default=Path("/tmp/memplan-large"))
    parser.add_argument("--out", type=Path, help="append the JSON lines to this file")
    parser.add_argument("--before", type=Path, help="another installation's memplan command, "
                                                    "run right after on the same file")
    args = parser.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    rows = []
    for name in args.problems.split(","):
        path = problem_file(args.work, name)
        for limit in (float(t) for t in args.time_limit.split(",")):
            row = dict(problem=name, limit=limit, **_solve(path, limit))
            if "error" in row:
                print(json.dumps(row), flush=True)
                continue
            if args.before:
                before = _solve(path, limit, args.before)
                row.update({f"before_{k}": v for k, v in before.items()
                            if k in ("solve_s", "ratio", "heuristic", "status", "rss_mb",
                                     "error")})
            if args.peer == "all" or name in args.peer.split(","):
                row.update(_peer(path, limit, row["lower_bound"]))
            row["load_average"] = os.getloadavg()[0]
            rows.append(row)
            line = json.dumps(row)
            print(line, flush=True)
            if args.out:
                with args.out.open("a") as out:
                    out.write(line + "\n")
    if args.before:
        print("\n| problem | buffers | limit s | solve s before | solve s after | arena / bound "
              "before | arena / bound after | heuristic before | heuristic after | status "
              "before | status after | load avg |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            if "before_ratio" not in r:
                continue
            print(f"| {r['problem']} | {r['buffers']} | {r['limit']:g} | "
                  f"{r['before_solve_s']:.2f} | {r['solve_s']:.2f} | {r['before_ratio']:.5f} | "
                  f"{r['ratio']:.5f} | {r['before_heuristic']:.5f} | {r['heuristic']:.5f} | "
                  f"{r['before_status']} | {r['status']} | {r['load_average']:.1f} |")
    print("\n| problem | buffers | limit s | wall s | read s | solve s | CPU s | arena / bound "
          "| peak MB | SuperMalloc | load avg |")
    print("|---|---:|---:|---:|---:|---:|---:|---|---:|---|---:|")
    for r in rows:
        peer = f"{r['peer_ratio']:.5f} in {r['peer_s']:.1f} s, {r['peer_rss_mb']} MB" \
            if "peer_ratio" in r else \
            r.get("peer_error", "-")
        arena = "opt" if r["status"] == "optimal" else f"{r['ratio']:.5f}"
        print(f"| {r['problem']} | {r['buffers']:,} | {r['limit']:g} | {r['wall']:.1f}"
              f"{' (said)' if r['warned'] else ''} | {r['load_s']:.1f} | {r['solve_s']:.1f} | "
              f"{r['cpu']:.1f} | {arena} | {r['rss_mb']} | {peer} | {r['load_average']:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
