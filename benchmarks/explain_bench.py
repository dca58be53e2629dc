"""What `memplan.explain` costs and finds: the light ONNX models, and packing cores at scale.

``python -m benchmarks.explain_bench [--sizes 50,200,800] [--time-limit 60]``

- every light ONNX model of the onnx package: ``explain`` of its
  ``greedy_by_size`` plan (peak operator, gap, gap step), timed against
  loading the model (``from_onnx``) in the same run;
- a packing that fits every step's live load but not the capacity, at
  several sizes: the seven buffers of the chain gadget of
  tests/test_explain.py (scaled to KiB) between two tilings of the
  ``capacity x time`` strip (random guillotine cuts: they fit exactly, so
  every step is full and the gadget's seven buffers are the only minimal
  core). ``explain`` must name exactly those seven; timed against the exact
  planner proving the whole problem infeasible in the same run.
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path

import onnx

import memplan
from memplan import Buffer, Problem, plan_with

UNIT = 1024
CAPACITY = 6 * UNIT
GADGET = [("b0", 4, 0, 1), ("b1", 2, 0, 2), ("b3", 3, 1, 3), ("b2", 1, 1, 4), ("b5", 1, 2, 4),
          ("b6", 4, 3, 8), ("b11", 2, 7, 8)]  # every step <= 6 units, no layout in 6
FILLERS = [("b4", 1, 2, 3), ("b7", 1, 4, 5), ("b8", 1, 4, 6), ("b9", 1, 5, 7), ("b10", 1, 6, 7)]


def tiling(rng: random.Random, start: int, end: int, low: int, high: int, count: int,
           prefix: str) -> list[Buffer]:
    """``count`` (about) buffers that tile ``[start, end) x [low, high)`` by guillotine cuts."""
    if count <= 1 or (end - start < 2 and high - low < 2 * UNIT):
        return [Buffer(f"{prefix}", high - low, start, end)]
    by_time = end - start >= 2 and (high - low < 2 * UNIT or rng.random() < 0.5)
    if by_time:
        cut = rng.randint(start + 1, end - 1)
        share = max(1, round(count * (cut - start) / (end - start)))
        return (tiling(rng, start, cut, low, high, share, prefix + "a")
                + tiling(rng, cut, end, low, high, count - share, prefix + "b"))
    cut = low + UNIT * rng.randint(1, (high - low) // UNIT - 1)
    share = max(1, round(count * (cut - low) / (high - low)))
    return (tiling(rng, start, end, low, cut, share, prefix + "c")
            + tiling(rng, start, end, cut, high, count - share, prefix + "d"))


def chain_problem(size: int, seed: int = 0) -> Problem:
    rng = random.Random(seed)
    span = max(8, size // 4)
    before = tiling(rng, 0, span, 0, CAPACITY, size // 2, "x")
    gadget = [Buffer(id, units * UNIT, span + s, span + e) for id, units, s, e in
              GADGET + FILLERS]
    after = tiling(rng, span + 8, 2 * span + 8, 0, CAPACITY, size // 2, "y")
    return Problem(before + gadget + after, capacity=CAPACITY, name=f"chain{size}")


def light_models(args) -> None:
    folder = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
    print("| model | buffers | bound | greedy_by_size | gap | peak at | gap opens at | "
          "explain s | load s | ratio |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for path in sorted(folder.glob("*.onnx")):
        began = time.perf_counter()
        problem = memplan.load(path)
        loaded = time.perf_counter() - began
        plan = plan_with("greedy_by_size", problem)
        began = time.perf_counter()
        found = memplan.explain(problem, plan)
        seconds = time.perf_counter() - began
        peak = found.peaks[0].operator
        gap = found.gap
        print(f"| {path.stem} | {len(problem)} | {found.lower_bound} | {plan.arena_size} | "
              f"{plan.arena_size / found.lower_bound - 1:+.1%} | {peak.step} {peak.op} | "
              f"{'-' if gap is None else f'{gap.step} {gap.operator.op}'} | {seconds:.2f} | "
              f"{loaded:.2f} | {seconds / loaded:.2f} |")


def cores(args) -> None:
    print("| buffers | set named | exactly the gadget | minimal | CP-SAT checks | explain s | "
          "exact proves infeasible s | ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for size in args.sizes:
        problem = chain_problem(size)
        assert memplan.live_bytes(problem).max() <= CAPACITY
        began = time.perf_counter()
        found = memplan.explain(problem, time_limit=args.time_limit, threads=args.threads)
        seconds = time.perf_counter() - began
        began = time.perf_counter()
        exact = plan_with("exact", problem, time_limit=args.time_limit, threads=args.threads)
        proof = time.perf_counter() - began
        reason = found.capacity
        named = {t.id for t in reason.tensors}
        proven = exact.status == "infeasible" and exact.best_bound > CAPACITY
        print(f"| {len(problem)} | {len(named)} ({reason.kind}) | "
              f"{named == {row[0] for row in GADGET}} | {reason.minimal} | {reason.checks} | "
              f"{seconds:.2f} | {proof:.2f}{'' if proven else ' (not proven)'} | "
              f"{seconds / proof:.2f} |")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.explain_bench")
    parser.add_argument("--sizes", default="50,200,800",
                        type=lambda text: [int(x) for x in text.split(",")])
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--threads", type=int, default=1, help="CP-SAT threads")
    args = parser.parse_args(argv)
    light_models(args)
    print()
    cores(args)


if __name__ == "__main__":
    main()
