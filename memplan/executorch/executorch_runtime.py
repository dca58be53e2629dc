"""Prove a plan of a ``.pte`` program in ExecuTorch's runtime: the original against the re-planned.

Why: the frontend rebuilt the lifetimes from the instruction chain, and a
wrong rebuild gives a plan that is valid for the problem and wrong for the
program. Running both programs in ExecuTorch's own runtime on the same inputs
settles it for those inputs.

Steps (`prove_program`):

- check the plan with the validator against the problem rebuilt from the
  program; write the re-planned program (`memplan.executorch.pte_program`,
  without its checks, so that an invalid plan is run too and seen to fail);
- load each program in ``executorch.runtime`` (the ``Program`` object stays
  referenced while its method runs: the method points into it) and call the
  method ``calls`` times on seeded inputs (floating point: normal; integers:
  the call's number, so a position input walks 0, 1, 2; booleans: random);
  a stateful program (mutable buffers) is called three times by default, so
  that state written by one call is read by the next;
- every output of every call must be bit-identical (the bytes compared).

Cost: loading and running each program ``calls`` times, plus the
validator's sweep.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from memplan.errors import ProblemError
from memplan.executorch.executorch_pte import PteLayout, pte_layout
from memplan.executorch.pte_flatbuffer import Tensor
from memplan.executorch.pte_program import same_problem, with_offsets
from memplan.formats.memplan_json import read_plan
from memplan.plan import Plan
from memplan.validate import Violation, validate


@dataclass
class ProgramProof:
    """What running a ``.pte`` program with its own plan and with memplan's showed."""

    model: str
    plan_file: str
    method: str
    original_bytes: int  # the arena size the program states
    planned_bytes: int  # the re-planned program's
    lower_bound: int
    calls: int
    violations: list[Violation]
    mismatches: list[str] = field(default_factory=list)  # outputs that differ, runtime errors

    @property
    def ok(self) -> bool:
        return not self.violations and not self.mismatches

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "plan": self.plan_file, "method": self.method,
                "proven": self.ok, "original_bytes": self.original_bytes,
                "planned_bytes": self.planned_bytes, "lower_bound": self.lower_bound,
                "calls": self.calls, "violations": [str(v) for v in self.violations],
                "mismatches": self.mismatches}

    def lines(self) -> list[str]:
        verdict = "PROVEN" if self.ok else "MISMATCH"
        lines = [f"{verdict}: {self.plan_file} on {self.model} (method {self.method!r}, "
                 f"{self.calls} call{'s' * (self.calls != 1)} in ExecuTorch's runtime)",
                 f"original plan {self.original_bytes} bytes, re-planned "
                 f"{self.planned_bytes} bytes, lower bound {self.lower_bound} bytes"]
        if self.violations:
            lines.append(f"the validator finds {len(self.violations)} violations: "
                         + "; ".join(str(v) for v in self.violations[:3]))
        lines += self.mismatches[:10]
        if not self.mismatches:
            lines.append("every output of every call bit-identical to the original program's")
        return lines


def seeded_inputs(layout: PteLayout, calls: int, seed: int) -> list[list[Any]]:
    """Per call, the method's inputs: tensors of its dtypes and sizes, scalars as stored."""
    import torch

    plan = layout.program.plans[layout.plan_index]
    generator = torch.Generator().manual_seed(seed)
    dtypes = {"BOOL": torch.bool, "BYTE": torch.uint8, "CHAR": torch.int8, "SHORT": torch.int16,
              "INT": torch.int32, "LONG": torch.int64, "HALF": torch.float16,
              "FLOAT": torch.float32, "DOUBLE": torch.float64, "BFLOAT16": torch.bfloat16}
    result = []
    for call in range(calls):
        inputs = []
        for v in plan.inputs:
            value = plan.values[v]
            if not isinstance(value, Tensor):
                inputs.append(getattr(value, "value", None))  # a scalar as stored
                continue
            dtype = dtypes.get(value.scalar_type)
            if dtype is None:
                raise ProblemError(f"input value {v}: memplan makes no inputs of type "
                                   f"{value.scalar_type}", file=layout.file)
            if dtype.is_floating_point:
                inputs.append(torch.randn(value.sizes, generator=generator).to(dtype))
            elif dtype == torch.bool:
                inputs.append(torch.rand(value.sizes, generator=generator) < 0.5)
            else:
                inputs.append(torch.full(value.sizes, call, dtype=dtype))
        result.append(inputs)
    return result


def run(program: bytes, method: str, inputs: list[list[Any]]) -> list[list[bytes]]:
    """Per call, the bytes of every output of ``method`` run in ExecuTorch's runtime."""
    import torch
    from executorch.runtime import Runtime

    loaded = Runtime.get().load_program(program)
    runner = loaded.load_method(method)  # `loaded` stays referenced while this runs
    outputs = []
    for given in inputs:
        results = runner.execute(given)
        outputs.append([t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
                        if isinstance(t, torch.Tensor) else repr(t).encode()
                        for t in results])
    del runner, loaded
    return outputs


def prove_program(model: str | os.PathLike | bytes, plan: Plan, *, method: str | None = None,
                  mem_id: int | None = None, calls: int | None = None, seed: int = 0,
                  plan_file: str = "the plan", program: bytes | None = None) -> ProgramProof:
    """Run ``model`` with its own plan and with ``plan`` (its arena's); see the docstring.
    ``program``: the re-planned program to run (default: written from ``plan``)."""
    layout = pte_layout(model, method=method, mem_id=mem_id)
    violations = validate(layout.problem, plan)
    calls = calls if calls is not None else 3 if layout.stateful else 1
    original = model if isinstance(model, bytes) else read_bytes(model)
    replanned = program if program is not None else \
        with_offsets(layout, plan.offsets, plan.arena_size + layout.tail)
    inputs = seeded_inputs(layout, calls, seed)
    proof = ProgramProof(layout.file, plan_file, layout.method, layout.arena_size,
                         plan.arena_size + layout.tail, plan.lower_bound, calls, violations)
    try:
        expected = run(original, layout.method, inputs)
    except RuntimeError as error:
        raise ProblemError(f"ExecuTorch's runtime cannot run the original program ({error})",
                           file=layout.file) from None
    try:
        got = run(replanned, layout.method, inputs)
    except RuntimeError as error:
        proof.mismatches.append(f"the runtime refused the re-planned program: {error}")
        return proof
    for call, (want, have) in enumerate(zip(expected, got, strict=True)):
        for k, (a, b) in enumerate(zip(want, have, strict=True)):
            if a != b:
                proof.mismatches.append(f"call {call}: output {k} differs from the original "
                                        f"program's")
    return proof


def read_bytes(path: str | os.PathLike) -> bytes:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as error:
        raise ProblemError(f"cannot read: {error.strerror}", file=str(path)) from None


def prove_plan_file(model: str | os.PathLike, plan_file: str | os.PathLike, *,
                    method: str | None = None, mem_id: int | None = None,
                    calls: int | None = None, seed: int = 0) -> ProgramProof:
    """`prove_program` with the plan a memplan JSON file holds (``memplan solve -o
    plan.json``), or a re-planned ``.pte`` (``memplan solve -o planned.pte``: its offsets
    must be a plan of ``model``'s problem, and that program is what runs)."""
    problem = pte_layout(model, method=method, mem_id=mem_id).problem
    if str(plan_file).lower().endswith(".pte"):
        planned = pte_layout(plan_file, method=method, mem_id=mem_id)
        same_problem(planned, problem)
        plan = Plan.from_offsets(problem, planned.offsets, planner="the planned program")
        return prove_program(model, plan, method=method, mem_id=mem_id, calls=calls,
                             seed=seed, plan_file=str(plan_file),
                             program=read_bytes(plan_file))
    plan = read_plan(plan_file, problem)
    return prove_program(model, plan, method=method, mem_id=mem_id, calls=calls, seed=seed,
                         plan_file=str(plan_file))
