"""Prove memplan's plan of a Relax module in TVM's VM: the default build against memplan's.

Why: the frontend rebuilt the lifetimes from the bindings, and the pass
rewrote the functions; a wrong lifetime gives a plan valid for the problem
and wrong for the module. Running both builds on the same inputs settles it
for those inputs.

Steps (`prove_relax`):

- build the module twice for ``target`` (``llvm``): with the pipeline
  ``tvm.compile`` runs by default, and with `memplan.tvm.pipeline` (every plan validated, the
  rewrite read back and validated too);
- in ``relax.VirtualMachine``, call every Relax function whose parameters
  are tensors (or tuples of them) on seeded inputs (floating point: normal;
  integers: small non-negative), once per length in ``lengths`` for its
  symbolic dimensions (each at most its ``tir_var_upper_bound``);
- every output must be bit-identical between the builds (the bytes compared).

Cost: two builds (seconds each for small models) and the calls.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import tvm
from tvm import relax

import memplan.tvm
from memplan.tvm.relax import relax_functions

LENGTHS = (1, 7, 64)  # symbolic dimensions are tried at these (capped at the upper bound)


@dataclass
class RelaxProof:
    """What running a module's builds with Relax's plan and with memplan's showed."""

    reports: list[Any]  # memplan.tvm.FunctionReport per function and device
    calls: list[str] = field(default_factory=list)  # "forward(seq=7)": each call compared
    mismatches: list[str] = field(default_factory=list)  # outputs that differ
    skipped: list[str] = field(default_factory=list)  # functions not called, and why
    machines: tuple[Any, ...] = field(default=(), repr=False)  # the two VMs: Relax's, memplan's

    @property
    def ok(self) -> bool:
        return bool(self.calls) and not self.mismatches

    def lines(self) -> list[str]:
        """The proof in lines: the reports, then the verdict."""
        verdict = (f"bit-identical in {len(self.calls)} call(s)" if self.ok else
                   "; ".join(self.mismatches) or "nothing was called")
        return [r.line() for r in self.reports] + [f"VM: {verdict}"] + [
            f"not called: {s}" for s in self.skipped]


def build(mod: Any, target: Any = "llvm", pipeline: Any = None) -> Any:
    """``mod`` built for ``target`` with ``pipeline`` (when None, the one ``tvm.compile``
    runs by default)."""
    target = tvm.target.Target(target) if isinstance(target, str) else target
    return relax.build(mod, target, relax_pipeline=pipeline if pipeline is not None
                       else "default")


def prove_relax(mod: Any, *, target: Any = "llvm", lengths: tuple[int, ...] = LENGTHS,
                seed: int = 0, time_limit: float | None = 10.0,
                pipeline: Any = None) -> RelaxProof:
    """Build ``mod`` with Relax's plan and with memplan's (``pipeline``: by default
    `memplan.tvm.pipeline` with ``time_limit``), run both (see the module docstring)."""
    pipeline = pipeline if pipeline is not None else memplan.tvm.pipeline(time_limit)
    plain = relax.VirtualMachine(build(mod, target), tvm.cpu())
    planned = relax.VirtualMachine(build(mod, target, pipeline), tvm.cpu())
    proof = RelaxProof(list(pipeline.reports), machines=(plain, planned))
    for name in relax_functions(mod):
        func = mod[name]
        try:
            calls = list(call_inputs(func, lengths, seed))
        except TypeError as why:
            proof.skipped.append(f"{name}: {why}")
            continue
        for label, inputs in calls:
            call = f"{name}({label})"
            expected = _flat(plain[name](*_to_tvm(inputs)))
            got = _flat(planned[name](*_to_tvm(inputs)))
            proof.calls.append(call)
            for k, (a, b) in enumerate(zip(expected, got, strict=True)):
                if a.shape != b.shape or a.tobytes() != b.tobytes():
                    proof.mismatches.append(f"{call}: output {k} differs")
    return proof


def call_inputs(func: Any, lengths: tuple[int, ...], seed: int):
    """``(label, inputs)`` per length: seeded arrays for ``func``'s parameters, symbolic
    dimensions at that length (capped at their upper bound); `TypeError` for a parameter
    that is no tensor nor tuple of tensors."""
    attrs = func.attrs or {}
    upper = dict(attrs["tir_var_upper_bound"]) if "tir_var_upper_bound" in attrs else {}
    symbols = [v.name for v in relax.analysis.tir_vars_in_type(func.ty)]
    tried = sorted({min(n, int(upper.get(s, n))) for n in lengths for s in symbols}) \
        if symbols else [None]
    for n in tried:
        rng = np.random.default_rng(seed)
        values = {s: min(n, int(upper.get(s, n))) for s in symbols}
        label = ", ".join(f"{s}={v}" for s, v in values.items())
        yield label, [_value(p.ty, values, rng, p.name) for p in func.params]


def _value(ty: Any, values: dict[str, int], rng: Any, name: str) -> Any:
    if isinstance(ty, relax.TupleType):
        return tuple(_value(t, values, rng, name) for t in ty.fields)
    if not isinstance(ty, relax.TensorType) or ty.shape is None:
        raise TypeError(f"parameter {name!r} is {type(ty).__name__}, not a tensor")
    shape = [int(d) if isinstance(getattr(d, "value", None), int) else values[d.name]
             for d in ty.shape.values]
    dtype = str(ty.dtype.value if hasattr(ty.dtype, "value") else ty.dtype)
    if dtype.startswith(("int", "uint")):
        return rng.integers(0, 8, size=shape).astype(dtype)
    if dtype == "bool":
        return rng.integers(0, 2, size=shape).astype(bool)
    return rng.standard_normal(shape).astype(dtype)


def _to_tvm(value: Any) -> Any:
    if isinstance(value, tuple | list):
        return [_to_tvm(v) for v in value] if isinstance(value, list) else \
            tuple(_to_tvm(v) for v in value)
    return tvm.runtime.tensor(value)


def _flat(output: Any) -> list[np.ndarray]:
    if hasattr(output, "numpy"):
        return [output.numpy()]
    return [array for item in output for array in _flat(item)]
