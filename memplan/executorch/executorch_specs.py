"""ExecuTorch's TensorSpecs in, one `Problem` per memory arena out, as ExecuTorch plans them.

Why: ExecuTorch's ``MemoryPlanningPass`` hands each planning algorithm the
set of TensorSpecs it must place, with their lifetimes already computed
(``executorch/exir/memory_planning.py``). For memplan to plan in ExecuTorch's
place, and for its plan to be comparable with ExecuTorch's greedy one, the
problem must hold exactly those tensors, with ExecuTorch's sizes, lifetimes,
alignment and arenas.

Steps (`spec_layout`):

- ``spec.realign(alignment)`` on every spec, as ExecuTorch's algorithms do:
  ``allocated_memory`` becomes the byte size rounded up to the alignment;
  every offset is a multiple of it;
- each ``mem_id`` is its own arena (None means 1, ExecuTorch's default);
  ``bufsizes[0]`` is the constants' placeholder and never planned;
- lifetimes are node indices, *inclusive* at both ends (``[first, last]``);
  memplan's are half-open, so a buffer is ``[first, last + 1)``. Mutable
  buffers (recurrent state, KV caches) arrive with ExecuTorch's whole-graph
  lifetime; graph inputs and outputs only when the pass allocates them;
- a spec with a ``storage_base`` (an in-place or offset alias) is not a
  buffer: it lives at its base's offset + ``storage_base_offset``, which
  must be aligned and fit inside the base (ExecuTorch's own rule), and its
  base's lifetime already covers its own; a spec of zero bytes needs no
  memory either;
- control flow: ExecuTorch plans a ``cond``/``while``/``map``/``scan``
  subgraph first and reserves its arena below the parent's:
  ``graph_module.input_mem_buffer_sizes[mem_id]`` bytes, rounded up to the
  alignment, are the parent's ``base`` and its plan starts there;
- buffer ids name the node that produces the tensor (the operator, not its
  ``alloc``; ``name[k]`` for the k-th output of a node with several), and
  the problem's ``steps`` name every node with its operator, the buffers it
  reads and writes (`memplan.explain`).

What ExecuTorch allows but cannot be planned safely is refused with
`ProblemError` naming the node: a size or lifetime that is not a whole
number (a dynamic shape without bound), a storage base not planned in the
same call, or an alias that is unaligned or sticks out of its base.
Cost: O(nodes + their arguments).
"""

from __future__ import annotations

import operator
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from executorch.exir import memory
from executorch.exir.memory_planning import (
    _get_mutable_buffer_specs,
    get_graph_input_tensors,
    get_graph_output_tensors,
    get_node_tensor_specs,
)

from memplan.errors import ProblemError
from memplan.problem import Buffer, Problem, Step

DEFAULT_MEM_ID = 1  # ExecuTorch's arena for a spec whose mem_id is None


@dataclass
class SpecLayout:
    """The buffers of one planning call: per arena (``mem_id``) a problem and its specs.

    ``roots[m][i]`` is buffer ``i`` of ``problems[m]``; its offset in ExecuTorch's
    arena ``m`` is ``bases[m]`` + its offset in a plan. ``derived`` are the specs that
    live inside another one's storage, ``empty`` the zero-byte ones (per arena).
    """

    problems: dict[int, Problem]
    roots: dict[int, list[Any]]
    bases: dict[int, int]
    derived: list[Any] = field(default_factory=list)
    empty: dict[int, list[Any]] = field(default_factory=dict)
    names: dict[Any, str] = field(default_factory=dict)  # spec -> its buffer id / node name

    @property
    def mem_ids(self) -> list[int]:
        """Every arena some spec of this call uses, in order."""
        return sorted(set(self.roots) | set(self.empty))


def node_label(node: Any) -> str:
    """The operator of a node, as ExecuTorch names it: ``aten.mm.out``, ``alloc``, ``view``..."""
    if node.op in ("placeholder", "output", "get_attr"):
        return node.op
    target = node.target
    if hasattr(target, "_schema"):  # an OpOverload: aten.add.out
        return str(target)
    return getattr(target, "__name__", str(target))


def spec_names(graph_module: Any) -> dict[Any, str]:
    """Per TensorSpec of the graph, the name of the node that produces it.

    An out-variant operator shares its spec with the ``alloc`` node before it: the
    operator's name wins; a view (``memory.view``) reports its base's spec and never
    names it; a node with several tensors names them ``node[k]``."""
    names: dict[Any, str] = {}
    allocs: dict[Any, str] = {}
    for node in graph_module.graph.nodes:
        if node.op == "output" or node.target == memory.view:
            continue
        specs = get_node_tensor_specs(node)
        for k, spec in enumerate(specs):
            name = node.name if len(specs) == 1 else f"{node.name}[{k}]"
            (allocs if node.target == memory.alloc else names).setdefault(spec, name)
    return {**allocs, **names}


def _whole(value: Any, what: str, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ProblemError(f"{what} is {value!r}, not a whole number (a dynamic shape "
                           f"without bound?): memplan plans fixed sizes", buffer=name)
    return value


def spec_layout(specs: Iterable[Any], graph_module: Any, *, alignment: int,
                signature: Any = None, name: str = "") -> SpecLayout:
    """The problems of one planning call: ``specs`` as ExecuTorch hands them to an
    algorithm (see the module docstring), realigned to ``alignment``; O(nodes)."""
    specs = list(dict.fromkeys(specs))  # a set or a list; order kept, duplicates once
    names = spec_names(graph_module)
    planned = set(specs)
    inputs = get_graph_input_tensors(graph_module.graph.nodes, signature) | \
        _get_mutable_buffer_specs(graph_module.graph.nodes, signature)
    outputs = get_graph_output_tensors(graph_module.graph.nodes)
    sizes = list(getattr(graph_module, "input_mem_buffer_sizes", None) or [])
    layout = SpecLayout({}, {}, {}, names=names)
    buffers: dict[int, list[Buffer]] = {}
    for k, spec in enumerate(specs):
        label = names.get(spec, f"spec#{k}")
        names.setdefault(spec, label)
        size = _whole(spec.realign(alignment), "its size", label)
        mem_id = DEFAULT_MEM_ID if spec.mem_id is None else _whole(spec.mem_id, "mem_id", label)
        if spec.storage_base is not None:
            _check_derived(spec, planned, alignment, names, label)
            layout.derived.append(spec)
            continue
        if size == 0:
            layout.empty.setdefault(mem_id, []).append(spec)
            continue
        first, last = (_whole(t, "its lifetime", label) for t in spec.lifetime)
        if not 0 <= first <= last:
            raise ProblemError(f"lifetime {spec.lifetime} is not [first, last] node "
                               f"indices", buffer=label)
        kind = "input" if spec in inputs else "output" if spec in outputs else "activation"
        buffers.setdefault(mem_id, []).append(
            Buffer(label, size, first, last + 1, alignment, kind=kind))
        layout.roots.setdefault(mem_id, []).append(spec)
    steps = graph_steps(graph_module, names, constant_nodes(signature))
    for mem_id, rows in buffers.items():
        base = sizes[mem_id] if mem_id < len(sizes) else 0
        layout.bases[mem_id] = -(-base // alignment) * alignment
        arena = name if len(buffers) == 1 else f"{name} mem_id {mem_id}".strip()
        layout.problems[mem_id] = Problem(rows, name=arena, steps=steps)
    for mem_id in layout.empty:
        base = sizes[mem_id] if mem_id < len(sizes) else 0
        layout.bases.setdefault(mem_id, -(-base // alignment) * alignment)
    return layout


def _check_derived(spec: Any, planned: set, alignment: int, names: dict, label: str) -> None:
    """Refuse a storage-backed spec whose base is not planned here, or that an offset
    plan cannot honour: unaligned, or past its base's end (ExecuTorch's greedy asserts
    the same); a cycle of bases too."""
    seen = {spec}
    base, child = spec.storage_base, spec
    while base is not None:
        if base in seen:
            raise ProblemError("its storage bases form a cycle", buffer=label)
        seen.add(base)
        offset = _whole(child.storage_base_offset, "its storage_base_offset", label)
        if offset < 0 or offset % alignment:
            raise ProblemError(f"storage_base_offset {offset} is not a multiple >= 0 of the "
                               f"alignment {alignment}", buffer=names.get(child, label))
        if offset + child.realign(alignment) > base.realign(alignment):
            raise ProblemError(f"lives at {offset} in {names.get(base, 'its base')!r} and "
                               f"sticks out of its {base.allocated_memory} bytes",
                               buffer=names.get(child, label))
        if base.storage_base is None and base not in planned:
            raise ProblemError(f"its storage base {names.get(base, '?')!r} is not planned "
                               f"with it (a graph input, a shared mutable buffer?)",
                               buffer=label)
        base, child = base.storage_base, base


def root_of(spec: Any) -> tuple[Any, int]:
    """The spec whose buffer holds ``spec``'s storage, and ``spec``'s offset in it."""
    delta = 0
    while spec.storage_base is not None:
        delta += spec.storage_base_offset
        spec = spec.storage_base
    return spec, delta


def constant_nodes(signature: Any) -> set[str]:
    """The placeholders of an exported program's graph that are constants: parameters,
    buffers and lifted tensor constants the program never mutates (from its graph
    signature; none known without one)."""
    if signature is None:
        return set()
    from torch.export.graph_signature import InputKind, OutputKind

    mutated = {spec.target for spec in signature.output_specs
               if spec.kind in (OutputKind.BUFFER_MUTATION, OutputKind.PARAMETER_MUTATION)}
    kinds = (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR)
    return {spec.arg.name for spec in signature.input_specs
            if spec.kind in kinds and spec.target not in mutated and hasattr(spec.arg, "name")}


def _read(arg: Any, names: dict[Any, str], constants: set[str]) -> tuple[list[str], list[str]]:
    """(values, constants) that reading node ``arg`` reads: through a static view
    (``memory.view``) its base; a node without a tensor (a size computed at run time)
    by its own name."""
    while arg.target == memory.view:
        arg = arg.args[0]
    if arg.op == "placeholder" and arg.name in constants:
        return [], [arg.name]
    read = [names[s] for s in get_node_tensor_specs(arg) if s in names]
    return (read or [arg.name]), []


def graph_steps(graph_module: Any, names: dict[Any, str], constants: set[str] = frozenset()
                ) -> list[Step]:
    """One `Step` per node (the node index is ExecuTorch's lifetime unit): its name, its
    operator, the tensors it reads and those it writes (an out variant writes its
    ``out`` arguments; an ``alloc`` writes nothing, it only reserves), and the
    ``constants`` (placeholder names, `constant_nodes`) it reads."""
    steps = []
    for node in graph_module.graph.nodes:
        writes: tuple[str, ...] = ()
        if node.op != "output" and node.target not in (memory.alloc, memory.view,
                                                       operator.getitem):
            writes = tuple(names[s] for s in get_node_tensor_specs(node) if s in names)
        read, constant = [], []
        for arg in node.all_input_nodes:  # each node once, in the order of its arguments
            values, stored = _read(arg, names, constants)
            read += values
            constant += stored
        reads = tuple(r for r in dict.fromkeys(read) if r not in writes)
        steps.append(Step(node.name, node_label(node), reads, writes,
                          tuple(dict.fromkeys(constant))))
    return steps
