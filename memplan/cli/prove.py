"""``memplan prove MODEL PLAN.json``: run the model in one arena at the plan's offsets.

- an ONNX model runs node by node in one arena at the plan file's offsets
  (`memplan.onnx.prove`, onnxruntime or the reference backend), its outputs
  compared bit for bit with a normal run; the model options the plan file
  stores apply;
- a ``.tflite`` model runs in TFLite-Micro with the plan and with TFLM's own
  planner (`memplan.tflite.tflm_arena`);
- a ``.pte`` program runs in ExecuTorch with its own plan and with the plan
  file's (`memplan.executorch.executorch_runtime`);
- a TVM Relax module saved as TVMScript (``.py``, no plan file) is built with
  Relax's default pipeline and with memplan's, and both run in TVM's VM
  (`memplan.tvm.relax_vm`).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from memplan.cli.checks import UsageError
from memplan.cli.exit_codes import FAILED, OK
from memplan.cli.models import dims, onnx_options
from memplan.cli.parser import Parents, add_deprecated, add_input_seed
from memplan.onnx import BACKENDS


def add_command(sub, shared: Parents) -> None:
    """``memplan prove``: a model, its plan file, the back end and the inputs' seed."""
    proof = sub.add_parser("prove", parents=[shared.common, shared.model],
                           help="run an ONNX model in one arena at the offsets of a plan file (a "
                                ".tflite model: in TFLite-Micro, beside TFLM's own planner; an "
                                "ExecuTorch .pte: in ExecuTorch's runtime, beside its own plan; "
                                "a Relax .py module: in TVM's VM); exit 1 unless every output "
                                "matches a normal run bit for bit")
    proof.add_argument("model", help="the .onnx or .tflite model, or the .pte program (run "
                                     "with its own plan and with the plan file's in ExecuTorch)")
    proof.add_argument("plan", nargs="?",
                       help="its plan: memplan JSON, as 'memplan solve -o plan.json' writes "
                            "(the model options it stores apply), or for a .pte program the "
                            "re-planned .pte ('memplan solve -o planned.pte'); none for a Relax "
                            ".py module (memplan's pipeline plans it)")
    proof.add_argument("--backend", choices=BACKENDS, default="onnxruntime",
                       help="what runs the nodes (default: onnxruntime)")
    add_deprecated(proof, "--seed", add_input_seed(proof, "the"))
    proof.add_argument("--json", action="store_true", help="print the result as JSON")
    proof.set_defaults(run=run)


def _prove_tflite(path: Path, args: argparse.Namespace) -> int:
    """``memplan prove model.tflite plan.json``: both planners inside TFLite-Micro."""
    from memplan.tflite.tflm_arena import prove_plan_file

    onnx_options(path, args)  # refuses ONNX-only flags
    if args.dim or args.alignment is not None:
        raise UsageError(f"{path}: --dim and --alignment: the plan file's problem is TFLM's")
    report = prove_plan_file(path, args.plan, seed=args.input_seed)
    if args.json:
        print(json.dumps({
            "model": str(path), "plan": args.plan, "proven": report.ok,
            "outputs_identical": not report.mismatches, "arena_size": report.arena_size,
            "tflm_head": report.tflm and report.tflm.head,
            "planned_head": report.planned and report.planned.head,
            "tail": report.planned and report.planned.tail, "tflm_min_arena": report.min_arena,
            "planned_min_arena": report.planned_min_arena, "refused": report.refused}, indent=1))
    else:
        print(report)
    return OK if report.ok else FAILED


def _prove_relax(path: Path, args: argparse.Namespace) -> int:
    """``memplan prove module.py``: Relax's build against memplan's, in TVM's VM."""
    from memplan.tvm.relax import read_tvmscript
    from memplan.tvm.relax_vm import prove_relax

    if args.plan is not None:
        raise UsageError(f"{path}: a Relax module is proven with memplan's pipeline; give no "
                         f"plan file")
    proof = prove_relax(read_tvmscript(path), seed=args.input_seed)
    if args.json:
        print(json.dumps({"model": str(path), "proven": proof.ok, "calls": proof.calls,
                          "mismatches": proof.mismatches, "skipped": proof.skipped,
                          "functions": [r.line() for r in proof.reports]}, indent=1))
    else:
        print("\n".join(proof.lines()))
    return OK if proof.ok else FAILED


def run(args: argparse.Namespace) -> int:
    """``memplan prove``: by the model's kind, its proof; exit 1 unless it proves the plan."""
    path = Path(args.model)
    if path.suffix.lower() == ".py":
        return _prove_relax(path, args)
    if args.plan is None:
        raise UsageError(f"{path}: the plan file is missing: memplan prove MODEL PLAN.json")
    if path.suffix.lower() == ".tflite":
        return _prove_tflite(path, args)
    if args.method is not None and path.suffix.lower() != ".pte":
        raise UsageError(f"{path}: --method: for ExecuTorch .pte programs only")
    if path.suffix.lower() == ".pte":
        from memplan.executorch.executorch_runtime import prove_plan_file

        onnx_options(path, args)  # refuses ONNX-only flags
        if args.dim or args.alignment is not None:
            raise UsageError(f"{path}: --dim and --alignment: the plan file's problem is "
                             f"the program's")
        proof = prove_plan_file(path, args.plan, method=args.method, seed=args.input_seed)
        print(json.dumps(proof.to_dict(), indent=1) if args.json else "\n".join(proof.lines()))
        return OK if proof.ok else FAILED
    given = onnx_options(path, args)
    given.update({"dims": dims(args.dim)} if args.dim else {})
    given.update({"alignment": args.alignment} if args.alignment is not None else {})
    from memplan.onnx.prove import prove  # imports onnx: only for ONNX models

    proof = prove(path, args.plan, options=given, backend=args.backend,
                  seed=args.input_seed)
    print(json.dumps(proof.to_dict(), indent=1) if args.json else "\n".join(proof.lines()))
    return OK if proof.ok else FAILED
