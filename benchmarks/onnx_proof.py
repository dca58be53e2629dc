"""Prove many plans on real ONNX models: how often the arena run finds a mismatch, and its cost.

``python -m benchmarks.onnx_proof [--models light_squeezenet,...] [--planners a,b]``
``python -m benchmarks.onnx_proof --random 200``

For every light model of the onnx package (random inputs, seed 0), every
setting (the frontend's defaults; Concat in place; 64-byte alignment without
in place; weights in a region of their own) and every planner named, make a
plan, check it with the validator and run it in the arena
(`memplan.onnx.prove.prove_plan`, onnxruntime). Prints one row per model and
setting: plans proven, plans with a mismatch (there should be none: a
mismatch is a bug in the frontend or a planner), the optional aliases taken,
the nodes whose output shares bytes with an input (run as an in-place kernel
would), and the seconds per proof. Weights in a region are planned by
`memplan.deploy.regions.plan_regions`, whatever the planner list says.

``--random N``: N random chains of element-wise nodes (broadcast inputs,
Cast to types of the same and of other widths, Pow with an int64 exponent)
on tensors of equal byte sizes, planned by every planner named twice: as
the frontend offers in place (output over an input of its shape and type),
and with the old rule added (over any dying input of equal byte size). The
first must prove clean; the second counts the plans that took an alias the
frontend now refuses over an input of other elements (another shape or
element width; a Cast between types of one width is harmless), and how many
of those the arena run caught.

Cost: one node-by-node run of the model per plan.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

from memplan.deploy.regions import plan_regions
from memplan.onnx.onnx import from_onnx
from memplan.onnx.onnx_arena import ArenaRunner
from memplan.onnx.prove import Proof, model_options
from memplan.problem import Alias
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


def random_chain(rng: np.random.Generator, index: int) -> onnx.ModelProto:
    """Element-wise nodes over x[2, 64] float32 and z[64] float32, every tensor 512 or 256 B."""
    f, i64, i32 = TensorProto.FLOAT, TensorProto.INT64, TensorProto.INT32
    nodes = [helper.make_node("Cast", ["z"], ["e0"], to=i64)]  # int64[64]: 512 B, like x
    full, wide = ["x"], ["e0"]  # float32[2, 64] tensors; int64[64] tensors
    half = ["z"]  # float32[64]
    for k in range(int(rng.integers(3, 8))):
        name = f"t{k}"
        choice = int(rng.integers(0, 6))
        if choice == 0:
            nodes.append(helper.make_node("Pow", [rng.choice(full), rng.choice(wide)], [name]))
        elif choice == 1:
            op = str(rng.choice(["Add", "Mul", "Sub", "Max"]))
            nodes.append(helper.make_node(op, [rng.choice(full), rng.choice(half)], [name]))
        elif choice == 2:
            op = str(rng.choice(["Relu", "Neg", "Abs", "Sigmoid"]))
            nodes.append(helper.make_node(op, [rng.choice(full)], [name]))
        elif choice == 3:  # same width, other type, and back
            nodes += [helper.make_node("Cast", [rng.choice(full)], [name + "i"], to=i32),
                      helper.make_node("Cast", [name + "i"], [name], to=f)]
        elif choice == 4:
            nodes.append(helper.make_node("Cast", [rng.choice(half)], [name], to=i64))
            wide.append(name)
            continue
        else:
            nodes.append(helper.make_node("Add", [rng.choice(half), rng.choice(half)], [name]))
            half.append(name)
            continue
        full.append(name)
    last = full[-1]
    nodes.append(helper.make_node("Identity", [last], ["y"]))
    for n, node in enumerate(nodes):
        node.name = f"n{n}_{node.op_type}"
    graph = helper.make_graph(nodes, f"chain{index}",
                              [helper.make_tensor_value_info("x", f, [2, 64]),
                               helper.make_tensor_value_info("z", f, [64])],
                              [helper.make_tensor_value_info("y", f, [2, 64])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)


def size_only_aliases(problem, model: onnx.ModelProto) -> list[Alias]:
    """The old rule: an element-wise output over any dying activation of its byte size."""
    aliased = {a.dst for a in problem.aliases}
    found = []
    for step, node in enumerate(model.graph.node):
        out = node.output[0]
        if node.op_type == "Identity" or out not in problem.ids or out in aliased:
            continue
        for name in node.input:
            if (name in problem.ids and problem.kinds[problem.index(name)] == "activation"
                    and problem.ends[problem.index(name)] == step + 1
                    and problem.sizes[problem.index(name)] == problem.sizes[problem.index(out)]
                    and not any(a.src == name or a.dst == name for a in problem.aliases)):
                found.append(Alias(name, out, 0, optional=True))
                break
    return found


def random_probe(count: int, planners: list[str]) -> int:
    rng = np.random.default_rng(19)
    rows = {"frontend": [0, 0, 0, 0], "size-only": [0, 0, 0, 0]}  # plans, took, caught, ok
    for index in range(count):
        model = random_chain(rng, index)
        runner = ArenaRunner(model, seed=index)
        problem = from_onnx(model)
        added = size_only_aliases(problem, model)
        # the frontend offers no other; element over element of one width is harmless
        refused = {(a.src, a.dst) for a in added
                   if runner.values[a.src].shape != runner.values[a.dst].shape
                   or runner.values[a.src].itemsize != runner.values[a.dst].itemsize}
        for rule, aliased in (("frontend", problem),
                              ("size-only", problem.replace(
                                  aliases=[*problem.aliases, *added]))):
            for name in planners:
                plan = plan_with(name, aliased)
                took = any(plan.offsets[aliased.index(s)] == plan.offsets[aliased.index(d)]
                           for s, d in refused) if rule == "size-only" else False
                report = runner.check(aliased, plan)
                row = rows[rule]
                row[0] += 1
                row[1] += took
                row[2] += took and not report.ok
                row[3] += report.ok
    print("| rule | plans | took an alias of other elements | caught by the arena run "
          "| proven |")
    print("|---|---|---|---|---|")
    for rule, (plans, took, caught, ok) in rows.items():
        print(f"| {rule} | {plans} | {took} | {caught} | {ok} |")
    return 0 if rows["frontend"][3] == rows["frontend"][0] else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.onnx_proof")
    parser.add_argument("--models", help="comma-separated stems (default: every light model)")
    parser.add_argument("--planners", default=",".join(PLANNERS))
    parser.add_argument("--random", type=int, metavar="N", help="N random element-wise chains")
    args = parser.parse_args(argv)
    if args.random:
        return random_probe(args.random, args.planners.split(","))
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
