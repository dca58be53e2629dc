"""A plan stored in an ONNX model's ``metadata_props``, so that it travels with the model.

A runtime that loads the model finds the plan next to the graph it belongs
to; no side file can get out of step. Keys written (values are strings, as
``metadata_props`` requires):

- ``memplan.plan``: the memplan plan document as JSON (format
  ``memplan-plan``, see `memplan.frontends.memplan_json`): offsets by tensor
  name, arena size, lower and proven bound, status, planner, and the regions
  and granted scratch sizes when there are any;
- ``memplan.arena_size``: the arena size in bytes, in decimal, for a runtime
  that only needs to reserve the arena.

Writing replaces earlier ``memplan.*`` entries and keeps every other entry.
`write_annotated` never holds a second copy of the weights: from a file it
copies the model's top-level fields in chunks, leaving out old ``memplan.*``
props, and appends the two keys (protobuf reads fields in any order); from a
``ModelProto`` it writes the graph one initializer at a time. It writes to a
temporary file beside ``path``, then renames it, so ``path`` may be the model
itself. External data is never read nor written: tensors stored there keep
their references. Cost O(file size) in time, O(chunk + graph without
weights) in memory. ``onnx`` is imported when first used (it costs a quarter
of a second, which a command that plans a CSV file need not pay).
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

from memplan.errors import ProblemError
from memplan.frontends.memplan_json import plan_from_dict, plan_to_dict
from memplan.plan import Plan
from memplan.problem import Problem

if TYPE_CHECKING:
    import onnx

PLAN_KEY = "memplan.plan"
ARENA_KEY = "memplan.arena_size"
_PREFIX = "memplan."


CHUNK = 1 << 24  # bytes copied at once


def _model(model: onnx.ModelProto | str | os.PathLike, *, weights: bool = True
           ) -> onnx.ModelProto:
    """The model, parsed from its own bytes only: no path named inside it is ever opened."""
    from memplan.frontends.onnx_graph import load_graph, load_model

    return (load_model if weights else load_graph)(model)[0]


def _entries(problem: Problem, plan: Plan) -> list[tuple[str, str]]:
    return [(PLAN_KEY, json.dumps(plan_to_dict(problem, plan))), (ARENA_KEY, str(plan.arena_size))]


def annotate(model: onnx.ModelProto | str | os.PathLike, problem: Problem,
             plan: Plan) -> onnx.ModelProto:
    """A copy of ``model`` whose metadata_props carry ``plan`` (see the module doc)."""
    import onnx

    annotated = onnx.ModelProto()
    annotated.CopyFrom(_model(model))
    kept = [(p.key, p.value) for p in annotated.metadata_props if not p.key.startswith(_PREFIX)]
    del annotated.metadata_props[:]
    for key, value in kept + _entries(problem, plan):
        annotated.metadata_props.add(key=key, value=value)
    return annotated


def read_plan(model: onnx.ModelProto | str | os.PathLike, problem: Problem) -> Plan:
    """The plan stored in ``model`` by `annotate`, for ``problem``."""
    import onnx

    proto = _model(model, weights=False)
    props = {p.key: p.value for p in proto.metadata_props}
    if PLAN_KEY not in props:
        raise ProblemError(f"the model has no {PLAN_KEY!r} metadata; was it annotated?",
                           file=None if isinstance(model, onnx.ModelProto) else str(model))
    try:
        document = json.loads(props[PLAN_KEY])
    except (ValueError, RecursionError) as error:
        raise ProblemError(f"the {PLAN_KEY!r} metadata is not a plan document ({error})",
                           file=None if isinstance(model, onnx.ModelProto) else str(model)
                           ) from None
    return plan_from_dict(document, problem, source=PLAN_KEY)


def write_annotated(path: str | os.PathLike, model: onnx.ModelProto | str | os.PathLike | bytes,
                    problem: Problem, plan: Plan, *, node_order: list[int] | None = None
                    ) -> None:
    """Save the annotated model to ``path``: its bytes, weights included as they are.

    ``node_order`` lists every node's position in the graph in the order to
    write them (a reordered model: `memplan.operator_order.Reordering.node_order`).
    Not `onnx.save`, which writes a tensor's external data to the location
    the model names: tensors stored as external data keep their references
    unchanged, and no file other than ``path`` is written. See the module
    docstring for how the weights are copied without being held twice.
    """
    import onnx

    from memplan.frontends.onnx_weightless import encode_varint

    target = os.fspath(path)
    temporary = f"{target}.{os.getpid()}.partial"
    entries = b"".join(
        encode_varint(_METADATA << 3 | 2) + encode_varint(len(entry)) + entry
        for entry in (onnx.StringStringEntryProto(key=key, value=value).SerializeToString()
                      for key, value in _entries(problem, plan)))
    try:
        with open(temporary, "wb") as handle:
            if isinstance(model, onnx.ModelProto):
                _write_proto(handle, model, node_order)
            else:
                _copy_model(handle, model, node_order)
            handle.write(entries)
        os.replace(temporary, target)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)


_METADATA = 14  # ModelProto.metadata_props
_GRAPH = 7  # ModelProto.graph
_NODE = 1  # GraphProto.node
_INITIALIZER = 5  # GraphProto.initializer


def _checked_order(node_order: list[int] | None, count: int) -> list[int]:
    order = list(range(count)) if node_order is None else list(node_order)
    if sorted(order) != list(range(count)):
        raise ValueError(f"node_order must list each of the graph's {count} node positions once")
    return order


def _copy(handle, source, start: int, stop: int) -> None:
    source.seek(start)
    for offset in range(start, stop, CHUNK):
        handle.write(source.read(min(CHUNK, stop - offset)))


def _copy_model(handle, model: str | os.PathLike | bytes, node_order: list[int] | None) -> None:
    """The model file's top-level fields, in chunks, without ``memplan.*`` metadata.

    With ``node_order``, the graph's fields are copied one by one, its nodes
    last and in that order (same bytes, same length).
    """
    import io

    import onnx

    from memplan.frontends.onnx_weightless import fields

    _model(model, weights=False)  # refuses a file that is not a model, naming it
    with (io.BytesIO(model) if isinstance(model, bytes) else open(model, "rb")) as source:
        end = source.seek(0, os.SEEK_END)
        source.seek(0)
        for number, start, payload, stop in fields(source, end):
            source.seek(payload)
            if number == _METADATA and onnx.StringStringEntryProto.FromString(
                    source.read(stop - payload)).key.startswith(_PREFIX):
                continue
            if number != _GRAPH or node_order is None:
                _copy(handle, source, start, stop)
                continue
            _copy(handle, source, start, payload)  # the graph's tag and length
            source.seek(payload)
            nodes = []
            for inner, first, _, last in fields(source, stop):
                if inner == _NODE:
                    nodes.append((first, last))
                else:
                    _copy(handle, source, first, last)
            for position in _checked_order(node_order, len(nodes)):
                _copy(handle, source, *nodes[position])


def _write_proto(handle, model: onnx.ModelProto, node_order: list[int] | None) -> None:
    """``model`` without ``memplan.*`` metadata, its graph one initializer at a time."""
    import onnx

    from memplan.frontends.onnx_weightless import copy_fields, encode_varint

    head, rest = onnx.ModelProto(), onnx.GraphProto()
    copy_fields(model, head, {_GRAPH, _METADATA})
    copy_fields(model.graph, rest, {_INITIALIZER, _NODE})
    rest.node.extend(model.graph.node[p]
                     for p in _checked_order(node_order, len(model.graph.node)))
    head.metadata_props.extend(p for p in model.metadata_props if not p.key.startswith(_PREFIX))
    handle.write(head.SerializeToString())
    if not model.HasField("graph"):
        return
    graph = rest.SerializeToString()
    sizes = [tensor.ByteSize() for tensor in model.graph.initializer]
    tag = encode_varint(_INITIALIZER << 3 | 2)
    length = len(graph) + sum(len(tag) + len(encode_varint(size)) + size for size in sizes)
    handle.write(encode_varint(_GRAPH << 3 | 2) + encode_varint(length) + graph)
    for tensor, size in zip(model.graph.initializer, sizes, strict=True):
        handle.write(tag + encode_varint(size) + tensor.SerializeToString())

