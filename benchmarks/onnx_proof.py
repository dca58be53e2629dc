"""Prove many plans on real ONNX models: how often the arena run finds a mismatch, and its cost.

``python -m benchmarks.onnx_proof [--models light_squeezenet,...] [--planners a,b]``

For every light model of the onnx package (random inputs, seed 0), every
setting (the frontend's defaults; Concat in place; 64-byte alignment without
in place; weights in a region of their own) and every planner named, make a
plan, check it with the validator and run it in the arena
(`memplan.prove.prove_plan`, onnxruntime). Prints one row per model and
setting: plans proven, plans with a mismatch (there should be none: a
mismatch is a bug in the frontend or a planner), the optional aliases taken,
the nodes whose output shares bytes with an input (run as an in-place kernel
would), and the seconds per proof. Weights in a region are planned by
`memplan.deploy.regions.plan_regions`, whatever the planner list says.
Cost: one node-by-node run of the model per plan.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import onnx

from memplan.deploy.regions import plan_regions
from memplan.frontends.onnx import from_onnx
from memplan.onnx_arena import ArenaRunner
from memplan.prove import Proof, model_options
from memplan.registry import plan_with
from memplan.validate import validate

SETTINGS = {
    "default": {},
    "concat_inplace": {"concat_inplace": True},
    "align64_no_inplace": {"alignment": 64, "inplace": False},
    "weights_region": {"weights": "region"},
}
PLANNERS = ("greedy_by_size", "greedy_by_breadth", "first_fit", "shared_objects", "hill_climb")


def light_models() -> list[Path]:
    return sorted((Path(onnx.__file__).parent / "backend/test/data/light").glob("light_*.onnx"))


def shared_bytes(problem, plan) -> int:
    """Optional aliases the plan took (output placed over its input)."""
    taken = (plan.offsets[problem.alias_dst] == plan.offsets[problem.alias_src]) & \
        problem.alias_optional
    return int(np.count_nonzero(taken))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.onnx_proof")
    parser.add_argument("--models", help="comma-separated stems (default: every light model)")
    parser.add_argument("--planners", default=",".join(PLANNERS))
    args = parser.parse_args(argv)
    paths = light_models()
    if args.models:
        paths = [p for p in paths if p.stem in args.models.split(",")]
    planners = args.planners.split(",")
    print("| model | setting | plans | proven | mismatch | optional aliases taken | s/proof |")
    print("|---|---|---|---|---|---|---|")
    failures = 0
    for path in paths:
        runner = ArenaRunner(path, seed=0)
        for setting, options in SETTINGS.items():
            problem = from_onnx(path, **options)
            region = options.get("weights") == "region"
            plans = [plan_regions(problem)] if region else \
                [plan_with(name, problem) for name in planners]
            proven = taken = 0
            began = time.perf_counter()
            for plan in plans:
                report = runner.check(problem, plan)
                proof = Proof(str(path), plan.planner, model_options(**options), problem, plan,
                              validate(problem, plan), report)
                proven += proof.ok
                taken += shared_bytes(problem, plan)
                if not proof.ok:
                    print("\n".join(proof.lines()))
            seconds = (time.perf_counter() - began) / len(plans)
            failures += len(plans) - proven
            print(f"| {path.stem} | {setting} | {len(plans)} | {proven} | "
                  f"{len(plans) - proven} | {taken} | {seconds:.2f} |", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
