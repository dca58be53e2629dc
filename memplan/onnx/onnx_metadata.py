"""A plan stored in an ONNX model's ``metadata_props``, so that it travels with the model.

A runtime that loads the model finds the plan next to the graph it belongs
to; no side file can get out of step. Keys written (values are strings, as
``metadata_props`` requires):

- ``memplan.plan``: the memplan plan document as JSON (format
  ``memplan-plan``, see `memplan.formats.memplan_json`): offsets by tensor
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
their files. Written into the model's own folder their locations stay as
they are; into another folder, each is rewritten as the path from there
(the written model reads the same files), and a file outside the new
folder, which onnx and onnxruntime would refuse to read, is refused before
anything is written. A model given as a ``ModelProto`` has no folder: its
locations are written as they are. Cost O(file size) in time, O(chunk +
graph without weights) in memory. ``onnx`` is imported when first used (it costs a quarter
of a second, which a command that plans a CSV file need not pay).
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

from memplan.errors import ProblemError
from memplan.formats.memplan_json import plan_from_dict, plan_to_dict
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
    from memplan.onnx.onnx_graph import load_graph, load_model

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
    write them (a reordered model: `memplan.schedule.operator_order.Reordering.node_order`).
    Not `onnx.save`, which writes a tensor's external data to the location
    the model names: no file other than ``path`` is written. Tensors stored
    as external data keep their files: written into another folder, their
    locations are rewritten from there, and a file the written model could
    not reach (outside its folder) is refused with `ProblemError` before
    anything is written. See the module docstring for how the weights are
    copied without being held twice.
    """
    import onnx

    from memplan.onnx.onnx_weightless import encode_varint

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
                _copy_model(handle, model, node_order, target)
            handle.write(entries)
        os.replace(temporary, target)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)


_METADATA = 14  # ModelProto.metadata_props
_GRAPH = 7  # ModelProto.graph
_FUNCTIONS = 25  # ModelProto.functions
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


def _mover(source: str, target: str, model: onnx.ModelProto):
    """What becomes of an external-data location when ``source`` is written to ``target``.

    None when nothing changes (the same folder, or no tensor in external
    data); else a function of ``(tensor name, location)`` giving the location
    from ``target``'s folder. onnx and onnxruntime read external data only
    inside the model's folder, so a file that the written model could not
    reach is refused (`ProblemError` naming the tensor): never a model that
    reads whatever sits beside it.
    """
    from memplan.onnx.onnx_weightless import MODEL, tensors_of

    folder = os.path.realpath(os.path.dirname(os.path.abspath(source)))
    out = os.path.realpath(os.path.dirname(os.path.abspath(target)))
    if folder == out or not any(
            tensor.external_data for tensor in tensors_of(model, MODEL)):
        return None

    def move(name: str, location: str) -> str:
        moved = os.path.relpath(os.path.normpath(os.path.join(folder, location)), out)
        if os.path.isabs(location) or moved == os.pardir or \
                moved.startswith(os.pardir + os.sep):
            raise ProblemError(
                f"tensor {name!r} keeps its data in {location!r} beside the model: the model "
                f"written to {out!r} could not read it (onnx and onnxruntime read external "
                f"data only inside the model's folder); write it into {folder!r} or a folder "
                f"above it", file=source)
        return moved
    return move


def _relocated(tensor: onnx.TensorProto, move) -> bool:
    """Rewrite ``tensor``'s external-data location with ``move``; whether it changed."""
    changed = False
    for entry in tensor.external_data:
        if entry.key == "location":
            entry.value = move(tensor.name, entry.value)
            changed = True
    return changed


def _pieces(source, kind: str, first: int, payload: int, last: int, move) -> list:
    """The field ``source[first:last]`` (a message of ``kind``) with its tensors relocated.

    Pieces are ``(start, stop)`` ranges of the file or bytes to write. A small
    message is parsed and written anew when a tensor in it moved; a large one
    is entered, so that weights are copied in chunks, never held.
    """
    from memplan.onnx.onnx_weightless import (
        CHILDREN,
        INLINE,
        MESSAGES,
        TENSOR,
        encode_varint,
        fields,
        tensors_of,
    )

    if last - payload <= INLINE:
        source.seek(payload)
        message = MESSAGES[kind].FromString(source.read(last - payload))
        if not any([_relocated(t, move) for t in tensors_of(message, kind)]):
            return [(first, last)]
        data = message.SerializeToString()
        source.seek(first)
        key = _read_key(source)
        return [key + encode_varint(len(data)) + data]
    inner: list = []
    source.seek(payload)
    for number, start, inner_payload, stop in fields(source, last):
        child = CHILDREN[kind].get(number)
        if kind == TENSOR and number == _EXTERNAL_DATA:
            source.seek(inner_payload)
            entry = onnx.StringStringEntryProto.FromString(source.read(stop - inner_payload))
            if entry.key == "location":
                name = _tensor_name(source, payload, last)
                entry.value = move(name, entry.value)
                data = entry.SerializeToString()
                inner.append(encode_varint(number << 3 | 2) + encode_varint(len(data)) + data)
                continue
        if child is not None and stop > inner_payload:
            inner += _pieces(source, child, start, inner_payload, stop, move)
        else:
            inner.append((start, stop))
    source.seek(first)
    key = _read_key(source)
    return [key + encode_varint(sum(map(_length, inner))), *inner]


_EXTERNAL_DATA = 13  # TensorProto.external_data
_TENSOR_NAME = 8  # TensorProto.name


def _read_key(source) -> bytes:
    """The tag of the field at the stream's position (a varint)."""
    key = b""
    while not key or key[-1] & 0x80:
        key += source.read(1)
    return key


def _tensor_name(source, payload: int, last: int) -> str:
    from memplan.onnx.onnx_weightless import fields

    position = source.tell()
    source.seek(payload)
    name = ""
    for number, _, inner, stop in fields(source, last):
        if number == _TENSOR_NAME:
            source.seek(inner)
            name = source.read(stop - inner).decode("utf-8", "replace")
    source.seek(position)
    return name


def _length(piece) -> int:
    return len(piece) if isinstance(piece, bytes) else piece[1] - piece[0]


def _write_pieces(handle, source, pieces: list) -> None:
    for piece in pieces:
        if isinstance(piece, bytes):
            handle.write(piece)
        else:
            _copy(handle, source, *piece)


def _copy_model(handle, model: str | os.PathLike | bytes, node_order: list[int] | None,
                target: str) -> None:
    """The model file's top-level fields, in chunks, without ``memplan.*`` metadata.

    With ``node_order``, the graph's fields are copied one by one, its nodes
    last and in that order (same bytes, same length); a graph stored as
    several ``graph`` fields (protobuf merges them) is written as one. Written
    into another folder, tensors in external data get locations from there
    (`_mover`).
    """
    import io

    import onnx

    from memplan.onnx.onnx_weightless import FUNCTION, NODE, TENSOR, encode_varint, fields

    weightless = _model(model, weights=False)  # refuses a file that is not a model, naming it
    move = None if isinstance(model, bytes) else _mover(os.fspath(model), target, weightless)

    def field(kind: str, first: int, payload: int, last: int) -> list:
        return [(first, last)] if move is None else _pieces(source, kind, first, payload, last,
                                                           move)

    with (io.BytesIO(model) if isinstance(model, bytes) else open(model, "rb")) as source:
        end = source.seek(0, os.SEEK_END)
        source.seek(0)
        graphs = []
        for number, start, payload, stop in fields(source, end):
            source.seek(payload)
            if number == _METADATA and onnx.StringStringEntryProto.FromString(
                    source.read(stop - payload)).key.startswith(_PREFIX):
                continue
            if number == _GRAPH and (node_order is not None or move is not None):
                graphs.append((payload, stop))
            else:
                kind = FUNCTION if number == _FUNCTIONS else None
                _write_pieces(handle, source, field(kind, start, payload, stop) if kind
                              else [(start, stop)])
        if not graphs:
            return
        pieces, nodes = [], []
        for payload, stop in graphs:
            source.seek(payload)
            for inner, first, inner_payload, last in fields(source, stop):
                if inner == _NODE:
                    nodes.append(field(NODE, first, inner_payload, last))
                elif inner == _INITIALIZER:
                    pieces += field(TENSOR, first, inner_payload, last)
                else:
                    pieces.append((first, last))
        for position in _checked_order(node_order, len(nodes)):
            pieces += nodes[position]
        handle.write(encode_varint(_GRAPH << 3 | 2) + encode_varint(sum(map(_length, pieces))))
        _write_pieces(handle, source, pieces)


def _write_proto(handle, model: onnx.ModelProto, node_order: list[int] | None) -> None:
    """``model`` without ``memplan.*`` metadata, its graph one initializer at a time."""
    import onnx

    from memplan.onnx.onnx_weightless import copy_fields, encode_varint

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

