"""ExecuTorch's greedy memory planner against memplan's, on PyTorch models, run for real.

For each model of `benchmarks.executorch_zoo`: export it, lower it twice
(ExecuTorch's default pass, greedy; and ``memplan.executorch.memory_planning_pass``
with a time limit), and report both arenas, the live-load bound, memplan's status
and seconds, the Verifier's verdict (memplan's pass runs it on every graph) and
the runtime's: both programs run in ``executorch.runtime`` on the model's seeded
inputs (several calls for a KV cache), outputs bit-identical between the two
programs and equal to eager PyTorch (``torch.allclose``)::

    PYTHONPATH=. python -m benchmarks.executorch_models            # every model
    PYTHONPATH=. python -m benchmarks.executorch_models llama lstm  # names containing these
    PYTHONPATH=. python -m benchmarks.executorch_models --limits    # the time limit kept

Bytes are ``sum(non_const_buffer_sizes)`` of the program (the arenas the
runtime allocates); the bound is memplan's arena less its proven distance to
the live-load bound, per arena.
"""

from __future__ import annotations

import copy
import sys
import time
from dataclasses import dataclass

import torch

from benchmarks import executorch_zoo as zoo

TIME_LIMIT = 10.0


@dataclass
class Row:
    model: str
    specs: int
    greedy: int
    memplan: int
    bound: int
    status: str
    seconds: float
    verifier: str
    runtime: str


def export(model: zoo.Model, *, xnnpack: bool = False):
    """The model's edge program (with XNNPACK delegates when asked); KV caches under no_grad."""
    from executorch.exir import to_edge, to_edge_transform_and_lower

    with torch.no_grad():
        exported = torch.export.export(model.module, model.inputs)
    if not xnnpack:
        return to_edge(exported)
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

    return to_edge_transform_and_lower(exported, partitioner=[XnnpackPartitioner()])


def lower(edge, memory_planning_pass=None):
    """``edge`` lowered to an ExecuTorch program with the given pass (None: ExecuTorch's
    default, greedy), on a copy: lowering rewrites the graphs in place."""
    from executorch.exir import ExecutorchBackendConfig

    config = ExecutorchBackendConfig() if memory_planning_pass is None else \
        ExecutorchBackendConfig(memory_planning_pass=memory_planning_pass)  # or {method: pass}
    return copy.deepcopy(edge).to_executorch(config)


def arena_bytes(program, method: str = "forward") -> int:
    """What the runtime allocates for the method's planned tensors."""
    plans = program.executorch_program.execution_plan
    return sum(next(p for p in plans if p.name == method).non_const_buffer_sizes)


def run(program, calls: list[tuple], method: str = "forward") -> list:
    """The method's outputs for each call, in one loaded program (its state carries over).
    The runtime's ``Program`` stays referenced while its method runs (else a crash)."""
    from executorch.runtime import Runtime

    loaded = Runtime.get().load_program(program.buffer)
    runner = loaded.load_method(method)
    outputs = []
    for call in calls:
        flat = [a for arg in call for a in (arg.values() if isinstance(arg, dict) else [arg])]
        outputs.append([t.clone() for t in runner.execute(flat)])
    del runner, loaded
    return outputs


def eager(model: zoo.Model) -> list:
    """PyTorch's outputs for each call, on a copy (a KV cache fills up)."""
    module = copy.deepcopy(model.module)
    with torch.no_grad():
        return [[y] if isinstance(y, torch.Tensor) else list(y)
                for y in (module(*call) for call in model.calls)]


def runtime_verdict(greedy_out: list, memplan_out: list, eager_out: list) -> str:
    """``identical`` (bit for bit with greedy's program, and close to eager PyTorch), or
    what differs."""
    for k, (g, m, e) in enumerate(zip(greedy_out, memplan_out, eager_out, strict=True)):
        if not all(torch.equal(a, b) for a, b in zip(g, m, strict=True)):
            return f"differs from greedy at call {k}"
        if not all(torch.allclose(a, b, rtol=1e-4, atol=1e-4) for a, b in zip(m, e,
                                                                             strict=False)):
            return f"differs from eager at call {k}"
    return "identical"


def measure(model: zoo.Model, *, xnnpack: bool = False, time_limit: float = TIME_LIMIT) -> Row:
    """One row of the table (see the module docstring)."""
    import memplan.executorch
    from memplan.errors import InvalidPlanError

    edge = export(model, xnnpack=xnnpack)
    greedy_program = lower(edge)
    planning_pass = memplan.executorch.memory_planning_pass(time_limit=time_limit)
    try:
        memplan_program = lower(edge, planning_pass)
    except InvalidPlanError as error:
        return Row(model.name, 0, arena_bytes(greedy_program), 0, 0, "invalid", 0.0,
                   str(error), "not run")
    report = planning_pass.reports[-1]
    verifier = f"passed ({sum(r.verify_seconds for r in planning_pass.reports):.1f} s)"
    plans = report.plans.values()
    memplan_bytes = arena_bytes(memplan_program)
    bound = memplan_bytes - sum(p.arena_size - p.lower_bound for p in plans)
    outputs = [run(p, model.calls) for p in (greedy_program, memplan_program)]
    status = "/".join(sorted({p.status for p in plans})) or "empty"
    return Row(model.name + (" xnnpack" if xnnpack else ""),
               sum(len(p) for p in report.problems.values()), arena_bytes(greedy_program),
               memplan_bytes, bound, status, report.seconds, verifier,
               runtime_verdict(*outputs, eager(model)))


MODELS = {  # name -> (builder, xnnpack)
    "llama d256 ctx128": (lambda: zoo.llama(256, 4, 128), False),
    "llama d512 ctx256": (lambda: zoo.llama(512, 4, 256), False),
    "llama kv d256 ctx256": (lambda: zoo.llama(256, 4, 256, kv_cache=True), False),
    "llama kv d512 x8 ctx512": (lambda: zoo.llama(512, 8, 512, kv_cache=True), False),
    "mobilebert": (zoo.mobilebert, False),
    "deit-tiny": (zoo.deit_tiny, False),
    "mobilenet-v3-small": (zoo.mobilenet_v3_small, False),
    "lstm": (zoo.lstm, False),
    "resnet-18": (zoo.resnet18, False),
    "deit-tiny xnnpack": (zoo.deit_tiny, True),
}


def table(rows: list[Row]) -> str:
    lines = ["| model | specs | greedy bytes | memplan bytes | live-load bound | status | "
             "seconds | greedy / memplan | Verifier | runtime |", "|---" * 10 + "|"]
    for r in rows:
        ratio = f"{r.greedy / r.memplan:.3f}" if r.memplan else "-"
        lines.append(f"| {r.model} | {r.specs} | {r.greedy:,} | {r.memplan:,} | {r.bound:,} | "
                     f"{r.status} | {r.seconds:.2f} | {ratio} | {r.verifier} | {r.runtime} |")
    return "\n".join(lines)


def limit_table(build=lambda: zoo.llama(512, 8, 512, kv_cache=True),
                limits=(0.5, 1.0, 3.0)) -> str:
    """Planning seconds against the time limit on one model (exported once)."""
    import memplan.executorch

    model = build()
    edge = export(model)
    lines = ["| model | time limit | planning seconds | memplan bytes | status | proven gap |",
             "|---" * 6 + "|"]
    for limit in limits:
        planning_pass = memplan.executorch.memory_planning_pass(time_limit=limit, verify=False)
        program = lower(edge, planning_pass)
        report = planning_pass.reports[-1]
        lines.append(f"| {model.name} | {limit} | {report.seconds:.2f} | "
                     f"{arena_bytes(program):,} | {report.plans[1].status} | "
                     f"{report.gap:.3%} |")
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    if argv == ["--limits"]:
        print(limit_table())
        return
    chosen = [name for name in MODELS if not argv or any(a in name for a in argv)]
    rows = []
    for name in chosen:
        build, xnnpack = MODELS[name]
        began = time.perf_counter()
        rows.append(measure(build(), xnnpack=xnnpack))
        print(f"{name}: {rows[-1]} ({time.perf_counter() - began:.0f} s)", file=sys.stderr,
              flush=True)
    print(table(rows))


if __name__ == "__main__":
    main(sys.argv[1:])
