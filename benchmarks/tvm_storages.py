"""Relax's storages against memplan's shared storages, for Vulkan and WebGPU targets.

On a GPU without offsets (Vulkan, Metal, OpenCL, WebGPU, ROCm) memplan's pass
plans shared storages (`memplan.tvm.relax_pass`). For each model of
`benchmarks.tvm_models` and three architectures of ``transformers``
(`benchmarks.tvm_zoo.transformers_models`): lower it through
``memplan.tvm.pipeline(time_limit=10)`` for each target (no GPU needed) and
report per function Relax's storages together, memplan's shared storages
(their count and bytes), the bound (`memplan.bounds.ranked_live_bound` and
CP-SAT's), the status and gap; then the CPU proof: the module built for
``llvm`` with ``form="shared"`` (one storage per group, offset 0, no
``ensure_zero_offset``, as on the GPU) runs in ``relax.VirtualMachine``
bit-identical to Relax's default build::

    PYTHONPATH=. python -m benchmarks.tvm_storages              # every model
    PYTHONPATH=. python -m benchmarks.tvm_storages bert llama   # names containing these
    python -m benchmarks tvm-storages --no-vm                   # lower only, no CPU proof
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from dataclasses import dataclass

import tvm

import memplan.tvm
from benchmarks import tvm_models
from benchmarks import tvm_zoo as zoo
from memplan.tvm.relax_vm import prove_relax

TARGETS = ("vulkan", "webgpu")
TIME_LIMIT = 10.0
LENGTHS = (1, 64)  # symbolic lengths of the CPU proof (each capped at its upper bound)


@dataclass
class Row:
    model: str
    target: str
    function: str
    tensors: int
    relax: int
    memplan: int
    storages: int
    bound: int
    status: str
    gap: float
    seconds: float
    proof: str


def models(wide_layers: int = tvm_models.WIDE_LAYERS) -> list[tuple[str, object, tuple]]:
    """(name, a function exporting the module, lengths of the CPU proof) for each model."""
    ours = [(m.name, (lambda m=m: zoo.export(m)), tuple(min(n, max(lengths)) for n in LENGTHS))
            for m, lengths, _ in tvm_models.models(wide_layers)]
    return ours + [(name, build, LENGTHS) for name, build in zoo.transformers_models()]


def measure(name: str, mod, lengths: tuple[int, ...], vm: bool = True) -> list[Row]:
    """One model's rows: per target the pass's reports, and the CPU proof's verdict."""
    verdict = "not run"
    if vm:
        proof = prove_relax(mod, lengths=lengths,
                            pipeline=memplan.tvm.pipeline(TIME_LIMIT, form="shared"))
        verdict = f"identical ({len(proof.calls)} calls)" if proof.ok else \
            "; ".join(proof.mismatches) or "not run"
    rows = []
    for kind in TARGETS:
        pipeline = memplan.tvm.pipeline(TIME_LIMIT, target=tvm.target.Target(kind))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a tensor over the cap is named in the report
            pipeline(mod)
        rows += [Row(name, kind, r.function, r.tensors, r.relax_bytes, r.memplan_bytes,
                     r.storages, r.bound, r.status, r.gap, r.seconds, verdict)
                 for r in pipeline.reports if r.tensors]
    return rows


def table(rows: list[Row]) -> str:
    lines = ["| model | target | function | tensors | Relax bytes | memplan bytes (storages) "
             "| bound | saved | status | gap | seconds | CPU proof (shared form) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        saved = 1 - r.memplan / r.relax if r.relax else 0.0
        lines.append(f"| {r.model} | {r.target} | {r.function} | {r.tensors} | {r.relax:,} | "
                     f"{r.memplan:,} ({r.storages}) | {r.bound:,} | {saved:.1%} | {r.status} "
                     f"| {r.gap:.1%} | {r.seconds:.2f} | {r.proof} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks tvm-storages",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", help="only models whose name contains one")
    parser.add_argument("--no-vm", action="store_true", help="lower only: no CPU proof")
    parser.add_argument("--wide-layers", type=int, default=tvm_models.WIDE_LAYERS,
                        help=f"layers of the d-2048 decoder (default {tvm_models.WIDE_LAYERS})")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    rows = []
    for name, export, lengths in models(args.wide_layers):
        if args.names and not any(n.lower() in name.lower() for n in args.names):
            continue
        began = time.perf_counter()
        rows.extend(mine := measure(name, export(), lengths, vm=not args.no_vm))
        print(table(mine).splitlines()[-1], f"({time.perf_counter() - began:.0f} s)",
              file=sys.stderr, flush=True)
    print(table(rows))
    bad = [r for r in rows if r.memplan > r.relax or r.bound > r.memplan
           or (r.proof != "not run" and not r.proof.startswith("identical"))]
    return 2 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
