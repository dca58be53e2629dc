"""Relax's memory planner against memplan's, on models built with ``tvm.relax.frontend.nn``.

For each model of `benchmarks.tvm_zoo`: export it (zero pipeline; lifted
weight transforms where the row says so), build it for ``llvm`` twice
(``relax.get_default_pipeline`` and ``memplan.tvm.pipeline(time_limit=10)``),
and report per function Relax's bytes (its storages together), memplan's,
the live-load bound, memplan's status and planning seconds; then run both
builds in ``relax.VirtualMachine`` on seeded inputs (symbolic lengths at
several values, `memplan.tvm.relax_vm`): outputs bit-identical; and time
``forward`` with both plans, alternating runs, as a ratio of medians. The
d-2048 decoder's kernels are scheduled for CPU first (`tvm_zoo.cpu_schedule`,
the same module for both builds): unscheduled, one forward at 16 tokens takes
30 s::

    PYTHONPATH=. python -m benchmarks.tvm_models              # every model
    PYTHONPATH=. python -m benchmarks.tvm_models llama vit    # names containing these
    python -m benchmarks tvm llama                            # the same, from the runner
    python -m benchmarks tvm --no-vm "d 2048"                 # plan only: no build, no run

Bytes: the planned intermediates of each function (outputs and what Relax
leaves unplanned are the same in both builds and not counted).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import dataclass

import numpy as np
import tvm

import memplan.tvm
from benchmarks import tvm_zoo as zoo
from memplan.tvm.relax_vm import call_inputs, prove_relax

TIME_LIMIT = 10.0
RUNS = 7  # timed calls of forward per build, alternating
WIDE_RUNS = 3  # the d-2048 decoder's: one call at 512 tokens takes about 30 s on 2 cores


LENGTHS = (1, 64, 256)  # symbolic sequence lengths run (each capped at its upper bound)
WIDE_LENGTHS = (1, 16, 512)  # the d-2048 decoder's, up to its upper bound
WIDE_LAYERS = 1  # its layers (weights: 0.7 GB in float32 for one, 0.2 GB more per layer)


def models(wide_layers: int = WIDE_LAYERS) -> list[tuple[zoo.Model, tuple[int, ...], int]]:
    """The small models of the table, a ViT, and a Llama-style decoder at realistic width
    with its kernels scheduled for CPU; each with the lengths it runs at and its timed
    runs."""
    small = [zoo.mlp(), zoo.cnn(), zoo.block(), zoo.block(lifted=True), zoo.decoder(),
             zoo.decoder(lifted=True), zoo.llama(), zoo.llama(lifted=True), zoo.vit()]
    wide = zoo.llama(lifted=True, layers=wide_layers, d=2048, heads=32, kv_heads=4, ffn=5632,
                     vocab=32000, seq=512, scheduled=True)
    return [(m, LENGTHS, RUNS) for m in small] + [(wide, WIDE_LENGTHS, WIDE_RUNS)]


@dataclass
class Row:
    model: str
    function: str
    relax: int
    memplan: int
    bound: int
    status: str
    seconds: float
    verdict: str
    latency: str  # memplan's median over Relax's, forward at the largest length tried


def measure(model: zoo.Model, lengths: tuple[int, ...] = LENGTHS, vm: bool = True,
            runs: int = RUNS) -> list[Row]:
    """One model's rows: the reports of memplan's pass, the VM's verdict, latency (with
    ``vm=False`` the module is only lowered through memplan's pipeline: no build, no run)."""
    mod = zoo.export(model)
    pipeline = memplan.tvm.pipeline(TIME_LIMIT)
    if not vm:
        with tvm.target.Target("llvm"):
            pipeline(mod)
        return [Row(model.name, r.function, r.relax_bytes, r.memplan_bytes, r.bound,
                    r.status, r.seconds, "not run", "-") for r in pipeline.reports if r.tensors]
    proof = prove_relax(mod, lengths=lengths, pipeline=pipeline)
    verdict = f"identical ({len(proof.calls)} calls)" if proof.ok else "; ".join(
        proof.mismatches) or "not run"
    ratio = latency(mod, proof.machines, lengths, runs)
    return [Row(model.name, r.function, r.relax_bytes, r.memplan_bytes, r.bound, r.status,
                r.seconds, verdict, ratio) for r in proof.reports if r.tensors]


def latency(mod, machines, lengths, runs: int = RUNS) -> str:
    """``forward``'s median time with memplan's plan over Relax's, ``runs`` alternating
    calls each, at the largest length tried."""
    plain, planned = machines
    label, inputs = list(call_inputs(mod["forward"], lengths, 0))[-1]
    args = [tvm.runtime.tensor(v) if isinstance(v, np.ndarray)
            else tuple(map(tvm.runtime.tensor, v)) for v in inputs]
    times = {"relax": [], "memplan": []}
    for _ in range(runs):
        for name, vm in (("relax", plain), ("memplan", planned)):
            began = time.perf_counter()
            vm["forward"](*args)
            times[name].append(time.perf_counter() - began)
    ratio = statistics.median(times["memplan"]) / statistics.median(times["relax"])
    return f"{ratio:.2f} ({statistics.median(times['relax']) * 1e3:.1f} ms)"


def table(rows: list[Row]) -> str:
    lines = ["| model | function | Relax bytes | memplan bytes | bound | Relax / memplan | "
             "status | seconds | VM | latency memplan / Relax |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r.model} | {r.function} | {r.relax:,} | {r.memplan:,} | "
                     f"{r.bound:,} | {r.relax / r.memplan:.3f} | {r.status} | "
                     f"{r.seconds:.2f} | {r.verdict} | {r.latency} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks tvm", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", help="only models whose name contains one")
    parser.add_argument("--no-vm", action="store_true",
                        help="plan only: lower through memplan's pipeline, build and run nothing")
    parser.add_argument("--wide-layers", type=int, default=WIDE_LAYERS,
                        help=f"layers of the d-2048 decoder (default {WIDE_LAYERS})")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    names = args.names
    rows = []
    for model, lengths, runs in models(args.wide_layers):
        if names and not any(n.lower() in model.name.lower() for n in names):
            continue
        began = time.perf_counter()
        rows.extend(measure(model, lengths, vm=not args.no_vm, runs=runs))
        print(table(rows[-1:]).splitlines()[-1], f"({time.perf_counter() - began:.0f} s)",
              file=sys.stderr, flush=True)  # each row as it comes: the wide model is slow
    print(table(rows))
    bad = [r for r in rows if r.memplan > r.relax or r.verdict not in ("not run",)
           and not r.verdict.startswith("identical")]
    return 2 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
