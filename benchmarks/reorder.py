"""The operator-order search on the light ONNX models and the branchy models.

    python -m benchmarks.reorder [--fast-seconds 5] [--exact-seconds 20] [--models a,b]

Per model: the lower bound under the file's order, under the fast reorder
(with in-place aliases, as `memplan solve --reorder` plans), and the exact
reorder's peak and proven bound over every order and layout (without
in-place aliases, where its bound is a proof), with seconds. Every plan the
exact reorder returns is checked by the validator. Prints a markdown table.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import onnx

from benchmarks.branchy import MODELS, breadth_first
from memplan import lower_bound, validate
from memplan.onnx.onnx import from_onnx
from memplan.plan import Plan
from memplan.schedule.operator_order import reorder

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


def models(names: set[str] | None):
    for path in sorted(LIGHT.glob("light_*.onnx")):
        name = path.stem.removeprefix("light_")
        if names is None or name in names:
            yield name, onnx.load(path)
    for name, build in MODELS.items():
        for variant, model in ((name, build()), (f"{name} (bfs)", breadth_first(build()))):
            if names is None or name in names:
                yield variant, model


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fast-seconds", type=float, default=5.0)
    parser.add_argument("--exact-seconds", type=float, default=20.0)
    parser.add_argument("--models", help="comma-separated model names (default: all)")
    args = parser.parse_args(argv)
    names = set(args.models.split(",")) if args.models else None
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    print("| model | steps | file order | fast | saving | s | file order, no in-place | "
          "exact | proven bound | status | s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, model in models(names):
        began = time.perf_counter()
        fast = reorder(model, time_limit=args.fast_seconds)
        fast_s = time.perf_counter() - began
        exact = reorder(model, method="exact", time_limit=args.exact_seconds, inplace=False)
        peak = "-"
        if exact.offsets is not None:
            plan = Plan.from_offsets(exact.problem, exact.offsets, planner="reorder",
                                     best_bound=exact.best_bound)
            assert validate(exact.problem, plan) == [], name
            peak = plan.arena_size
        steps = len(fast.order)
        print(f"| {name} | {steps} | {fast.original_bound} | {fast.bound} | "
              f"{fast.saving:.1%} | {fast_s:.1f} | {lower_bound(from_onnx(model, inplace=False))}"
              f" | {peak} | {exact.best_bound} | {exact.stats['exact']['status']} | "
              f"{exact.seconds:.1f} |", flush=True)
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
