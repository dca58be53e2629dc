"""``python -m benchmarks.sweep_bench``: what a sweep on Dask costs and gains.

Two measures, each a ratio of runs made side by side in one process:

- speed-up: the light ONNX models x batch sizes x planners (default: every
  heuristic and ``exact``) swept on a local cluster of 1 worker process, then
  of 2 (each cluster started and warmed up before its clock starts: the time
  to start one is reported apart);
- per-task overhead: the same (model, batch) pairs planned by ``solve`` (the
  `memplan.solve` pipeline) in a plain loop in this process (load, re-batch,
  solve, validate) against a sweep of the same tasks on 1 worker, alternated
  ``--repeat`` times, the best of each kept; the difference divided by the
  number of tasks is what Dask, the row and the worker round trip add to each
  task. ``gap_per_task`` is the wall time not spent inside tasks, per task.

::

    python -m benchmarks.sweep_bench --batches 1,2,4,8 --planner all --time-limit 10 \\
        --workers 1,2 --out benchmarks/results/sweep

writes ``rows-<n>workers.csv`` and ``summary.json`` to ``--out`` and prints
the figures with ``uptime``'s load average before and after.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import time
from pathlib import Path

import onnx

import memplan
from memplan.onnx.onnx import from_onnx
from memplan.onnx.onnx_batch import rebatch
from memplan.onnx.onnx_graph import load_graph
from memplan.sweeps.sweep import make_tasks, run_task, sweep

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


def load_average() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def cluster(workers: int):
    """A started and warmed-up local cluster (every worker has planned one model)."""
    from distributed import Client, LocalCluster

    began = time.perf_counter()
    local = LocalCluster(n_workers=workers, threads_per_worker=1, dashboard_address=":0",
                         silence_logs=logging.CRITICAL, preload=["memplan.sweeps.sweep"])
    client = Client(local)
    client.wait_for_workers(workers)
    warm = make_tasks([LIGHT / "light_squeezenet.onnx"], capacities=[None], planners=["solve"])
    client.run(run_task, warm[0])  # every worker imports what planning needs, untimed
    return local, client, time.perf_counter() - began


def timed_sweep(workers: int, models, **grid) -> dict:
    local, client, startup = cluster(workers)
    try:
        began = time.perf_counter()
        table = sweep(models, client=client, **grid)
        wall = time.perf_counter() - began
    finally:
        client.close()
        local.close()
    return {"workers": workers, "tasks": len(table), "wall": wall, "startup": startup,
            "task_seconds": float(table["total_seconds"].sum()),
            "errors": int((table["status"] == "error").sum()),
            "valid": int(table["valid"].fillna(False).sum()), "table": table}


def solve_loop(models, batches, time_limit: float) -> tuple[float, int]:
    """``memplan.solve`` in a loop over (model, batch): load, re-batch, solve, validate."""
    began = time.perf_counter()
    count = 0
    for path in models:
        proto, source = load_graph(path)
        for batch in batches:
            problem = from_onnx(rebatch(proto, batch, source=source), name=Path(path).stem)
            plan = memplan.solve(problem, time_limit=time_limit, workers=1)
            assert memplan.validate(problem, plan) == []
            count += 1
    return time.perf_counter() - began, count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", default="1,2,4,8")
    parser.add_argument("--planner", default="all")
    parser.add_argument("--time-limit", type=float, default=10.0)
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--out", default="benchmarks/results/sweep")
    parser.add_argument("--repeat", type=int, default=2, help="loop/sweep pairs (best kept)")
    args = parser.parse_args()
    batches = [int(b) for b in args.batches.split(",")]
    counts = [int(w) for w in args.workers.split(",")]
    models = sorted(LIGHT.glob("light_*.onnx"))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    summary: dict = {"load_before": load_average(), "models": len(models), "batches": batches,
                     "planner": args.planner, "time_limit": args.time_limit}
    grid = dict(batches=batches, capacities=[None], planners=args.planner.split(","),
                time_limit=args.time_limit)
    runs = []
    for workers in counts:
        run = timed_sweep(workers, models, **grid)
        run.pop("table").to_csv(out / f"rows-{workers}workers.csv", index=False)
        run["gap_per_task"] = (run["wall"] - run["task_seconds"] / workers) / run["tasks"]
        runs.append(run)
        print(f"{workers} worker(s): {run['tasks']} tasks in {run['wall']:.1f} s "
              f"(cluster start {run['startup']:.1f} s), {run['errors']} errors, "
              f"{run['valid']} plans validated; worker time {run['task_seconds']:.1f} s, "
              f"{run['gap_per_task'] * 1000:.0f} ms/task between tasks; load {load_average()}",
              flush=True)
    summary["sweeps"] = runs
    if len(runs) > 1:
        summary["speedup"] = runs[0]["wall"] / runs[-1]["wall"]
        print(f"speed-up {runs[0]['workers']} -> {runs[-1]['workers']} workers: "
              f"{summary['speedup']:.2f}x")
    loops, sweeps = [], []
    for _ in range(args.repeat):  # alternated, the best of each kept
        loops.append(solve_loop(models, batches, args.time_limit))
        swept = timed_sweep(1, models, batches=batches, capacities=[None], planners=["solve"],
                            time_limit=args.time_limit)
        swept.pop("table")
        sweeps.append(swept)
    loop_wall, count = min(loops)
    swept = min(sweeps, key=lambda run: run["wall"])
    summary.update(solve_loop={"tasks": count, "wall": loop_wall,
                               "walls": [w for w, _ in loops]},
                   solve_sweep=swept, solve_sweep_walls=[run["wall"] for run in sweeps],
                   overhead_per_task=(swept["wall"] - loop_wall) / count,
                   load_after=load_average())
    print(f"solve in a loop: {count} plans in {loop_wall:.2f} s; sweep on 1 worker: "
          f"{swept['wall']:.2f} s (worker time {swept['task_seconds']:.2f} s); "
          f"overhead {summary['overhead_per_task'] * 1000:.0f} ms/task; "
          f"load before {summary['load_before']}, after {summary['load_after']}")
    (out / "summary.json").write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
