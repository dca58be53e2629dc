"""ExecuTorch's greedy memory planner against memplan's, on PyTorch models, run for real.

For each model of `benchmarks.executorch_zoo`: export it, lower it twice
(ExecuTorch's default pass, greedy; and ``memplan.executorch.memory_planning_pass``
with a time limit), and report both arenas, the live-load bound, memplan's status
and seconds, ``to_executorch``'s seconds with each pass, the Verifier's verdict
(memplan's pass runs it on every graph) and the runtime's: both programs run in
``executorch.runtime`` on the model's seeded inputs (several calls for a KV cache),
outputs bit-identical between the two programs and equal to eager PyTorch
(``torch.allclose``)::

    PYTHONPATH=. python -m benchmarks.executorch_models            # every model
    PYTHONPATH=. python -m benchmarks.executorch_models llama lstm  # names containing these
    PYTHONPATH=. python -m benchmarks.executorch_models --limits    # the time limit kept
    PYTHONPATH=. python -m benchmarks.executorch_models --large     # d2048 llama, 2 rounds
    PYTHONPATH=. python -m benchmarks.executorch_models --rounds 2 lstm  # lowered twice each
    PYTHONPATH=. python -m benchmarks.executorch_models --fold      # constants folded

``--large``: ExecuTorch's llama example at dim 2048 (`llama_2048`) with 2 layers, and
with 16 sharing one layer's weights (peak RSS 4.6 GB), each lowered twice with each
pass, alternating, in one process.

Bytes are ``sum(non_const_buffer_sizes)`` of the program (the arenas the
runtime allocates); the bound is memplan's arena less its proven distance to
the live-load bound, per arena.
"""

from __future__ import annotations

import copy
import statistics
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
    greedy_seconds: float = 0.0  # to_executorch, median over the rounds
    memplan_seconds: float = 0.0


def export(model: zoo.Model, *, xnnpack: bool = False):
    """The model's edge program (with XNNPACK delegates when asked); KV caches under no_grad."""
    from executorch.exir import to_edge, to_edge_transform_and_lower

    with torch.no_grad():
        exported = torch.export.export(model.module, model.inputs,
                                       dynamic_shapes=model.dynamic_shapes)
    if not xnnpack:
        return to_edge(exported)
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

    return to_edge_transform_and_lower(exported, partitioner=[XnnpackPartitioner()])


def lower(edge, memory_planning_pass=None):
    """``edge`` lowered to an ExecuTorch program with the given pass (None: ExecuTorch's
    default, greedy), on a copy: lowering rewrites the graphs in place."""
    return lowered(edge, memory_planning_pass)[1]


def lowered(edge, memory_planning_pass=None) -> tuple[float, object]:
    """(seconds of ``to_executorch``, the program) as `lower`; the copy is not timed."""
    from executorch.exir import ExecutorchBackendConfig

    config = ExecutorchBackendConfig() if memory_planning_pass is None else \
        ExecutorchBackendConfig(memory_planning_pass=memory_planning_pass)  # or {method: pass}
    mine = copy.deepcopy(edge)
    began = time.perf_counter()
    program = mine.to_executorch(config)
    return time.perf_counter() - began, program


def arena_bytes(program, method: str = "forward") -> int:
    """What the runtime allocates for the method's planned tensors."""
    plans = program.executorch_program.execution_plan
    return sum(next(p for p in plans if p.name == method).non_const_buffer_sizes)


def run(program, calls: list[tuple], method: str = "forward") -> list:
    """The method's outputs for each call, in one loaded program (its state carries over);
    ``program`` a program manager or its file's bytes. The runtime's ``Program`` stays
    referenced while its method runs (else a crash)."""
    from executorch.runtime import Runtime

    data = program if isinstance(program, bytes) else program.buffer
    loaded = Runtime.get().load_program(data)
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


def measure(model: zoo.Model, *, xnnpack: bool = False, time_limit: float = TIME_LIMIT,
            rounds: int = 1) -> Row:
    """One row of the table (see the module docstring): ``rounds`` lowerings with each
    pass, alternating (greedy first in even rounds), the median ``to_executorch`` seconds;
    then both programs in the runtime."""
    import memplan.executorch
    from memplan.errors import InvalidPlanError

    edge = export(model, xnnpack=xnnpack)
    seconds: dict[str, list[float]] = {"greedy": [], "memplan": []}
    programs, passes = {}, []
    for r in range(rounds):
        for who in ("greedy", "memplan")[::1 if r % 2 == 0 else -1]:
            planning_pass = None if who == "greedy" else \
                memplan.executorch.memory_planning_pass(time_limit=time_limit)
            programs.pop(who, None)  # one program of each at a time: LLM-sized ones are large
            try:
                took, program = lowered(edge, planning_pass)
            except InvalidPlanError as error:
                return Row(model.name, 0, 0, 0, 0, "invalid", 0.0, str(error), "not run")
            programs[who] = arena_bytes(program), program.buffer  # the file, not the graphs
            del program
            seconds[who].append(took)
            passes += [planning_pass] if planning_pass is not None else []
            print(f"{model.name} round {r} {who}: to_executorch {took:.1f} s",
                  file=sys.stderr, flush=True)
    planning_pass = passes[-1]
    report = planning_pass.reports[-1]
    verifier = f"passed ({sum(r.verify_seconds for r in planning_pass.reports):.1f} s)"
    plans = report.plans.values()
    (greedy_bytes, greedy_file), (memplan_bytes, memplan_file) = \
        programs["greedy"], programs["memplan"]
    del edge, programs
    bound = memplan_bytes - sum(p.arena_size - p.lower_bound for p in plans)
    runtime = runtime_verdict(*(run(p, model.calls) for p in (greedy_file, memplan_file)),
                              eager(model))
    status = "/".join(sorted({p.status for p in plans})) or "empty"
    return Row(model.name + (" xnnpack" if xnnpack else ""),
               sum(len(p) for p in report.problems.values()), greedy_bytes,
               memplan_bytes, bound, status, report.seconds, verifier, runtime,
               statistics.median(seconds["greedy"]), statistics.median(seconds["memplan"]))


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
    "llama d256 xnnpack": (lambda: zoo.llama(256, 4, 128), True),
    "mobilenet-v3-small xnnpack": (zoo.mobilenet_v3_small, True),
    "llama kv d256 dynamic": (lambda: zoo.llama(256, 4, 256, kv_cache=True, tokens=64,
                                                dynamic=True), False),
}


def llama_2048(layers: int, **shape) -> zoo.Model:
    """ExecuTorch's llama example at Llama-3.2-1B's width: dim 2048, grouped-query attention
    32/8, SwiGLU 8192, the example's 32,000-token vocabulary, KV cache, prefill of 512."""
    return zoo.llama(2048, layers, 512, kv_cache=True, tokens=512, vocab=32000, heads=32,
                     kv_heads=8, hidden=8192, **shape)


LARGE = {  # name -> (builder, xnnpack)
    "llama d2048 x2": (lambda: llama_2048(2), False),
    "llama d2048 x16 shared": (lambda: llama_2048(16, shared_weights=True), False),
}


def table(rows: list[Row]) -> str:
    lines = ["| model | specs | greedy bytes | memplan bytes | live-load bound | status | "
             "plan s | greedy / memplan | to_executorch s greedy / memplan | Verifier | "
             "runtime |", "|---" * 11 + "|"]
    for r in rows:
        ratio = f"{r.greedy / r.memplan:.3f}" if r.memplan else "-"
        lines.append(f"| {r.model} | {r.specs} | {r.greedy:,} | {r.memplan:,} | {r.bound:,} | "
                     f"{r.status} | {r.seconds:.2f} | {ratio} | {r.greedy_seconds:.1f} / "
                     f"{r.memplan_seconds:.1f} | {r.verifier} | {r.runtime} |")
    return "\n".join(lines)


def fold_constants():
    """ExecuTorch's constant propagation (``constant_prop_pass``) as the ``transform_passes``
    of ``to_edge_transform_and_lower``: what is computed from constants alone is computed
    once, at export, and stored (a transposed weight instead of the weight)."""
    from executorch.exir.pass_base import ExportedProgramPassBase, ExportedProgramPassResult
    from executorch.exir.pass_manager import ExportedProgramPassManager
    from executorch.exir.passes.constant_prop_pass import constant_prop_pass

    class FoldConstants(ExportedProgramPassBase):
        def call(self, exported_program):
            return ExportedProgramPassResult(constant_prop_pass(exported_program), True)

    return ExportedProgramPassManager([FoldConstants()])


def fold_table(build=lambda: llama_2048(2)) -> str:
    """The program as exported, with its constants folded at export (`FoldConstants`), and
    with XNNPACK delegates: greedy's arena, the bound, what ``memplan explain`` finds
    computed from constants at every run and the bound without it, the runtime's outputs
    against the program as exported (bit for bit) and eager PyTorch."""
    from executorch.exir import to_edge, to_edge_transform_and_lower

    import memplan

    model = build()
    with torch.no_grad():
        exported = torch.export.export(model.module, model.inputs,
                                       dynamic_shapes=model.dynamic_shapes)
    expected, reference = eager(model), None
    lines = ["| program | greedy bytes | bound | computed from constants (explain) | bound "
             "without it | runtime |", "|---" * 6 + "|"]
    for how in ("as exported", "constants folded", "xnnpack"):
        if how == "as exported":
            edge = to_edge(exported)
        elif how == "xnnpack":
            edge = export(model, xnnpack=True)
        else:
            edge = to_edge_transform_and_lower(exported, transform_passes=fold_constants())
        program = edge.to_executorch()
        del edge
        found = memplan.explain(memplan.from_executorch(program), time_limit=30)
        folded = ", ".join(f"{f.tensor} ({' '.join(o.op for o in f.operators)}, {f.size:,})"
                           for f in found.folding) or "none"
        outputs = run(program.buffer, model.calls)
        reference = reference or outputs
        same = all(torch.equal(a, b) for x, y in zip(outputs, reference, strict=True)
                   for a, b in zip(x, y, strict=True))
        close = runtime_verdict(outputs, outputs, expected) == "identical"
        lines.append(f"| {model.name}, {how} | {arena_bytes(program):,} | "
                     f"{found.lower_bound:,} | {folded} | "
                     f"{found.folded_bound if found.folding else found.lower_bound:,} | "
                     f"{'identical' if same else 'not bit-identical'} to as exported, "
                     f"{'close to' if close else 'differs from'} eager |")
        print(lines[-1], file=sys.stderr, flush=True)
        del program
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
    if argv == ["--fold"]:
        print(fold_table())
        return
    large = "--large" in argv
    argv = [a for a in argv if a != "--large"]
    rounds = 2 if large else 1
    if "--rounds" in argv:
        k = argv.index("--rounds")
        rounds, argv = int(argv[k + 1]), argv[:k] + argv[k + 2:]
    models = LARGE if large else MODELS
    chosen = [name for name in models if not argv or any(a in name for a in argv)]
    rows = []
    for name in chosen:
        build, xnnpack = models[name]
        began = time.perf_counter()
        rows.append(measure(build(), xnnpack=xnnpack, rounds=rounds))
        print(f"{name}: {rows[-1]} ({time.perf_counter() - began:.0f} s)", file=sys.stderr,
              flush=True)
    print(table(rows))


if __name__ == "__main__":
    main(sys.argv[1:])
