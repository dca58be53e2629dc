"""The lifetimes of an ExecuTorch execution plan's tensors, rebuilt from its instruction chain.

Why: a ``.pte`` file keeps where every planned tensor lives (memory id and
offset), not when: its lifetimes were node indices of a graph that is gone.
What runs is the chain of instructions, and every kernel call names the values
it reads and writes; the operator's schema says which is which.

Steps (`accesses`, then `lifetimes`):

- step 0: the plan's inputs arrive; instruction ``i`` runs at step ``i + 1``;
- a kernel call's arguments follow its schema, then its return value (a list
  of tensors when it returns several): a mutable
  (``Tensor(a!)``) keyword-only argument (``out=``) is written, a mutable
  positional one (``copy_``'s ``self``) read and written, any other tensor
  read; a return that aliases no argument is written too;
- a value read that no instruction writes and that is no input is a *static
  view*: the emitter gave it bytes inside its base. Its base is the value that
  last wrote those bytes before the view's first read; it must cover all of
  them, else the tensor was assembled in place from parts and is refused. The
  view becomes a memplan alias of its base, live from the base's write;
- a value read before anything wrote its bytes (and no input) is persistent
  state, a mutable buffer: live the whole program. A state inside another
  state's bytes is a view of it;
- every other value lives from its first write to its last read (the plan's
  outputs: to the end);
- a view made at run time (``executorch_prim::et_view``, dynamic shapes: its
  data pointed at its base's) is a view as above when it is memory-planned
  (at its base's bytes), else it stands for its base: reading it reads the base;
- a delegate call (XNNPACK...) may read and write any of its arguments (the
  file does not say which): each is written at the call and, when it holds
  data already (an input, or written before), read there too, so every
  argument is live across the call (safe); one never written before is the
  delegate's output, live from the call;
- besides, each step keeps the values it reads that are not planned
  (constants, sizes, a list's items one by one), and every value any step
  writes is noted (all arguments of a delegate or of an operator without a
  schema): what tells a constant from a value the run makes.

What cannot be rebuilt safely is refused with the instruction named: control
flow (``JumpFalseCall``, ``MoveCall``), ``FreeCall``, operators of unknown
schema. The schemas are read from torch's ``native_functions.yaml`` (which the
torch wheel ships in ``torchgen``) and ExecuTorch's kernel yamls, parsed by
``torchgen`` (neither torch nor ExecuTorch is imported). Cost: O(instructions x
arguments + views x values), plus reading the yamls' operator names once.
"""

from __future__ import annotations

import functools
import importlib.util
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memplan.errors import MissingExtraError, ProblemError
from memplan.executorch.pte_flatbuffer import ExecutionPlan, Scalar, Tensor, TensorList, shown

RUNTIME_VIEW = "executorch_prim::et_view"  # dynamic shapes: out's data set to self's at run time
SCHEMA_FILES = {  # where operator schemas are read: package -> files in it
    "torchgen": ["packaged/ATen/native/native_functions.yaml"],
    "executorch": ["kernels/portable/functions.yaml", "kernels/portable/custom_ops.yaml",
                   "kernels/portable/et_copy_ops.yaml", "kernels/quantized/quantized.yaml"]}


@dataclass
class Access:
    """When each planned value is read and written, and what every step does."""

    reads: dict[int, list[int]] = field(default_factory=dict)  # value -> steps reading it
    writes: dict[int, list[int]] = field(default_factory=dict)  # value -> steps writing it
    steps: list[tuple[str, list[int], list[int]]] = field(default_factory=list)  # op, r, w
    final: int = 0  # the last step: the plan's outputs are live up to it
    viewed: dict[int, int] = field(default_factory=dict)  # planned et_view output -> its base
    unplanned: list[list[int]] = field(default_factory=list)  # per step: other values read
    written: set[int] = field(default_factory=set)  # every value some instruction writes


@dataclass(frozen=True)
class Lifetime:
    """A value's half-open lifetime, and the base it views (or None) at ``delta`` bytes."""

    start: int
    end: int
    kind: str  # input, output, activation, state, view
    base: int | None = None
    delta: int = 0


def _schema_files() -> list[Path]:
    """torch's ``native_functions.yaml`` (in ``torchgen``, which the torch wheel ships) and
    ExecuTorch's kernel yamls, found without importing either package."""
    files = []
    for package, paths in SCHEMA_FILES.items():
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise MissingExtraError(f"reading .pte files needs {package}'s operator schemas, "
                                    f"which are not installed: pip install "
                                    f"'memplan[executorch]'")
        files += [Path(spec.submodule_search_locations[0], path) for path in paths]
    return files


@functools.cache
def _schema_texts() -> tuple[dict[str, str], dict[str, str]]:
    """Every operator's schema text by ``namespace::name.overload`` (``aten`` when none),
    and the operators torch generates (``autogen:``): the schema text they derive from."""
    texts, derived = {}, {}
    for path in _schema_files():
        for entry in path.read_text().split("\n- func: ")[1:]:
            text = entry.split("\n", 1)[0].strip()
            name = text.split("(", 1)[0]
            namespace, text = (name.split("::")[0], text.split("::", 1)[1]) if "::" in name \
                else ("aten", text)
            texts.setdefault(f"{namespace}::{text.split('(', 1)[0]}", text)  # torch's first
            for line in re.findall(r"^\s+autogen: (.+)$", entry, re.MULTILINE):
                for generated in line.split(","):
                    derived.setdefault(f"{namespace}::{generated.strip()}", text)
    return texts, derived


@functools.cache
def _schema(name: str, overload: str) -> Any:
    """The operator's parsed schema (torchgen's ``FunctionSchema``), or None; an out variant
    torch generates from another (``autogen:``) is derived as torchgen derives it."""
    from torchgen import native_function_generation as generation
    from torchgen.model import FunctionSchema, SchemaKind

    key = f"{name}.{overload}" if overload else name
    texts, derived = _schema_texts()
    try:
        if key in texts:
            return FunctionSchema.parse(texts[key])
        if key not in derived:
            return None
        base = FunctionSchema.parse(derived[key])
        out = {SchemaKind.functional: generation.functional_to_out_signature,
               SchemaKind.inplace: generation.self_to_out_signature,
               SchemaKind.mutable: generation.mutable_to_out_signature}[base.kind()](base)
        return out if str(out.name) == key.split("::", 1)[1] else None
    except (AssertionError, KeyError, ValueError, RuntimeError):
        return None


def _printable(name: str) -> str:
    """An operator's or delegate's name as steps and messages show it: as it is when
    printable and short (every operator memplan knows), else `shown`."""
    return name if name.isprintable() and len(name) <= 120 else shown(name)


def _tensors(values: list, index: int, planned: set[int], views: dict[int, int]) -> list[int]:
    """The planned tensors behind value ``index`` (a tensor, or a list of them); a run-time
    view stands for the tensor it views."""
    index = views.get(index, index)
    if index in planned:
        return [index]
    value = values[index] if 0 <= index < len(values) else None
    if isinstance(value, TensorList):
        return [views.get(i, i) for i in value.items if views.get(i, i) in planned]
    return []


def _items(values: list, index: int, views: dict[int, int]) -> list[int]:
    """The values behind argument ``index``: a list's items (tensors, sizes) one by one,
    else the value itself; a run-time view stands for the tensor it views."""
    index = views.get(index, index)
    value = values[index] if 0 <= index < len(values) else None
    items = value.items if isinstance(value, TensorList) else value.value \
        if isinstance(value, Scalar) and value.kind == "IntList" else [index]
    return [views.get(i, i) for i in items if i >= 0]


def _unplanned(values: list, index: int, planned: set[int], views: dict[int, int]) -> list[int]:
    """The values behind argument ``index`` that are not planned tensors: a constant, a
    tensor the runtime allocates, a scalar."""
    return [v for v in _items(values, index, views) if v not in planned]


def _kernel(plan: ExecutionPlan, i: int, call: Any, planned: set[int],
            views: dict[int, int], found: Access) -> tuple[str, list[int], list[int]]:
    """(operator, values read, values written) of kernel call ``call``, instruction ``i``;
    an ``et_view`` call adds its output to ``views`` (not planned) or ``found.viewed``.
    The other values it reads go to ``found.unplanned``, all it writes to ``found.written``."""
    name, overload = plan.operators[call.index]  # the index was checked when read
    op = _printable(f"{name}.{overload}" if overload else name)
    touched = [t for a in call.args for t in _tensors(plan.values, a, planned, views)]
    found.unplanned.append([v for a in call.args[:-1]
                            for v in _unplanned(plan.values, a, planned, views)])
    if name == RUNTIME_VIEW and len(call.args) == 3:
        base, out = call.args[0], call.args[2]
        found.written.add(out)
        if out in planned:  # at its base's bytes: a view like a static one (`lifetimes`)
            found.viewed[out] = views.get(base, base)
        else:
            views[out] = views.get(base, base)
        return op, touched, []
    schema = _schema(name, overload)
    if schema is None:
        if touched:
            raise ProblemError(f"instruction {i} ({op}): memplan knows no schema of this "
                               f"operator (torch's native_functions.yaml and ExecuTorch's "
                               f"kernel yamls), so which tensors it writes is unknown")
        for a in call.args:  # which values it writes is unknown: any of them
            found.written.update(_items(plan.values, a, views))
        return op, [], []
    arguments, returns = schema.arguments.flat_all, schema.returns
    positional = len(schema.arguments.flat_positional)
    if len(call.args) != len(arguments) + 1:  # the returns are one value (a list when several)
        raise ProblemError(f"instruction {i} ({op}): {len(call.args)} arguments, its schema "
                           f"has {len(arguments)} and a return value")
    reads, writes = [], []
    for k, (argument, index) in enumerate(zip(arguments, call.args, strict=False)):
        _check_type(plan, i, op, argument, index)
        tensors = _tensors(plan.values, index, planned, views)
        mutable = argument.annotation is not None and argument.annotation.is_write
        if not (mutable and k >= positional):  # a mutable keyword-only one is only written
            reads += tensors
        if mutable:
            writes += tensors
            found.written.update(_items(plan.values, index, views))
    if any(ret.annotation is None for ret in returns):  # not only the mutated arguments
        writes += _tensors(plan.values, call.args[-1], planned, views)
        found.written.update(_items(plan.values, call.args[-1], views))
    return op, reads, writes


ARGUMENT_KINDS = {  # a schema's argument type -> the value kinds the runtime takes for it
    "Tensor": ("Tensor",), "Tensor?": ("Tensor", "Null"), "Tensor[]": ("TensorList",),
    "Tensor?[]": ("OptionalTensorList",), "int[]": ("IntList",), "SymInt[]": ("IntList",),
    "int[]?": ("IntList", "Null"), "SymInt[]?": ("IntList", "Null"), "bool": ("Bool",),
    "int": ("Int",), "SymInt": ("Int",), "float": ("Double",), "bool?": ("Bool", "Null"),
    "int?": ("Int", "Null"), "SymInt?": ("Int", "Null"), "float?": ("Double", "Null"),
    "Scalar": ("Int", "Double", "Bool")}


def _check_type(plan: ExecutionPlan, i: int, op: str, argument: Any, index: int) -> None:
    """Refuse an argument whose value is not of its schema's type: the runtime's kernels
    convert it unchecked (``toTensor()`` on another value aborts the process)."""
    kinds = ARGUMENT_KINDS.get(re.sub(r"\[\d+\]", "[]", str(argument.type)))
    value = plan.values[index]
    kind = "Tensor" if isinstance(value, Tensor) else "OptionalTensorList" if \
        isinstance(value, TensorList) and value.optional else "TensorList" if \
        isinstance(value, TensorList) else value.kind
    if kinds is not None and kind not in kinds:
        raise ProblemError(f"instruction {i} ({op}): argument {argument.name!r} is value "
                           f"{index}, a {kind}, where the schema takes {argument.type}")


def _delegate(plan: ExecutionPlan, call: Any, planned: set[int], views: dict[int, int],
              found: Access, inputs: set[int]) -> tuple[str, list[int], list[int]]:
    """(name, values read, values written) of a delegate call: the file does not say which
    arguments a delegate writes, so each may be: written at the call, and read there too
    when it holds data already (an input, or written before). Each is live across the
    call; one never written before is the delegate's output, live from the call."""
    touched = [t for a in call.args for t in _tensors(plan.values, a, planned, views)]
    held = [v for v in touched if v in inputs or v in found.writes]
    found.unplanned.append([v for a in call.args for v in _unplanned(plan.values, a, planned,
                                                                        views)])
    found.written.update(v for a in call.args for v in _items(plan.values, a, views))
    return f"delegate {_printable(plan.delegates[call.index])}", held, list(dict.fromkeys(touched))


def accesses(plan: ExecutionPlan, planned: set[int]) -> Access:
    """Which step reads and writes which planned value, from the plan's one chain."""
    if len(plan.chains) != 1:
        raise ProblemError(f"execution plan {shown(plan.name)} has {len(plan.chains)} chains; "
                           f"memplan rebuilds plans of one chain")
    found = Access()
    views: dict[int, int] = {}  # et_view's output -> the planned tensor it views
    inputs = set(plan.inputs)
    for v in plan.inputs:
        if v in planned:
            found.writes.setdefault(v, []).append(0)
    for i, call in enumerate(plan.chains[0]):
        if call.kind == "DelegateCall":
            op, reads, writes = _delegate(plan, call, planned, views, found, inputs)
        elif call.kind != "KernelCall":
            why = {"FreeCall": "it frees a tensor memplan cannot follow"}.get(
                call.kind, "control flow cannot be rebuilt into lifetimes")
            raise ProblemError(f"instruction {i} ({call.kind}): {why}; memplan re-plans "
                               f"programs of kernel and delegate calls only")
        else:
            op, reads, writes = _kernel(plan, i, call, planned, views, found)
        for v in reads:
            found.reads.setdefault(v, []).append(i + 1)
        for v in writes:
            found.writes.setdefault(v, []).append(i + 1)
        found.steps.append((op, reads, writes))
    found.final = len(found.steps)
    return found


def _last_writer(value: int, before: int, found: Access, span: dict[int, tuple[int, int]]):
    """(value, step) that last wrote bytes of ``value`` before step ``before``, or None;
    several values writing them at that step: refused."""
    lo, hi = span[value]
    best: tuple[int, list[int]] = (-1, [])
    for other, steps in found.writes.items():
        o_lo, o_hi = span[other]
        if other == value or o_lo >= hi or lo >= o_hi:
            continue
        step = max((s for s in steps if s < before), default=-1)
        if step > best[0]:
            best = (step, [other])
        elif step == best[0] >= 0:
            best[1].append(other)
    if best[0] < 0:
        return None
    if len(best[1]) > 1:
        raise ProblemError(f"value {value}: its bytes were last written by values "
                           f"{best[1][:3]} at one step; memplan cannot tell its base")
    return best[1][0], best[0]


def lifetimes(found: Access, span: dict[int, tuple[int, int]], inputs: set[int],
              outputs: set[int]) -> dict[int, Lifetime]:
    """Every planned value's `Lifetime`; ``span`` gives its byte range ``[lo, hi)``."""
    end = found.final + 1
    result: dict[int, Lifetime] = {}
    state = []
    for v in sorted(span):
        reads, writes = found.reads.get(v, []), found.writes.get(v, [])
        first_read = min(reads, default=end)
        if writes and min(writes) < first_read:  # a mutated argument is read first
            last = max([*reads, *writes, found.final if v in outputs else 0])
            kind = "input" if v in inputs else "output" if v in outputs else "activation"
            result[v] = Lifetime(min(writes), last + 1, kind)
            continue
        if not reads and v not in outputs:
            result[v] = Lifetime(0, 1, "activation")  # never used: one step, out of the way
            continue
        source = None if writes else _last_writer(v, first_read, found, span)
        if source is None:
            state.append(v)
            continue
        base, step = source
        if not (span[base][0] <= span[v][0] and span[v][1] <= span[base][1]):
            raise ProblemError(f"value {v} is read at instruction {first_read - 1}, but its "
                               f"bytes were last written by value {base}, which covers only "
                               f"part of them (a tensor assembled in place); not re-planned")
        last = max([*reads, found.final if v in outputs else 0])
        result[v] = Lifetime(step, last + 1, "view", base, span[v][0] - span[base][0])
    for v, base in found.viewed.items():
        if (result.get(v, Lifetime(0, 0, "")).base, span[v][0]) != (base, span[base][0]):
            raise ProblemError(f"value {v}, a view of value {base} made at run time, is not "
                               f"planned at its bytes; not re-planned")
    state.sort(key=lambda v: (span[v][0] - span[v][1], v))  # largest first
    for k, v in enumerate(state):
        holders = [b for b in state[:k] if span[b][0] <= span[v][0] and span[v][1] <= span[b][1]]
        base = holders[0] if holders else None
        result[v] = Lifetime(0, end, "state", base, 0 if base is None else
                             span[v][0] - span[base][0])
    return result
