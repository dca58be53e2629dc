"""ONNX models without their weights: all that memory planning reads of a model.

A plan needs every tensor's element type and shape, and the values of the
few constants that shape inference reads (a Reshape's target shape, a
Slice's starts and ends, an Expand's shape, axes, indices); never a weight.
Parsed whole, a 500 MB model takes gigabytes (the protobuf, copies of it,
shape inference's serialised input), so:

- `load_weightless` reads a file's protobuf fields one by one. A message of
  at most `INLINE` bytes is kept whole (nodes, value infos, small tensors);
  the model, its graph and larger nodes, attributes and tensors are entered,
  and a large tensor's data fields (``raw_data``, ``float_data``, ...) are
  skipped with a seek. Memory: the graph without its weights' data;
- a large tensor keeps its values when `keeps_values` says shape inference
  may read them: an INT32 or INT64 tensor of rank 0 or 1 (ONNX's data
  propagation parses every such constant that a shape-computing operator
  reads). Its data is read back alone from its place in the file; such a
  tensor stored as external data is read alone from its file, which must lie
  in the model's folder. No other external data is opened;
- a ``ModelProto`` in memory is copied message by message, large tensors
  without their data (`weightless_copy`).

Dims, element types, names and external-data references stay, so shape
inference, and so the plan, are those of the full model. Sparse initializers
and training information are kept whole. Cost: one pass over the file's
fields outside large tensors, one seek per weight.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import BinaryIO

from onnx import (
    AttributeProto,
    FunctionProto,
    GraphProto,
    ModelProto,
    NodeProto,
    TensorProto,
)

from memplan.errors import ProblemError
from memplan.frontends.onnx_types import ELEMENT_BITS

INLINE = 1024  # bytes: a message this small is kept whole (onnx's own external-data threshold)
VARINT, I64, LEN, I32 = 0, 1, 2, 5  # protobuf wire types

MODEL, GRAPH, NODE, ATTRIBUTE, TENSOR, FUNCTION = (
    "model", "graph", "node", "attribute", "tensor", "function")
_MESSAGES = {MODEL: ModelProto, GRAPH: GraphProto, NODE: NodeProto, ATTRIBUTE: AttributeProto,
             TENSOR: TensorProto, FUNCTION: FunctionProto}
_NESTED = {  # message -> {field name: message kind}: the path from the model to its tensors
    MODEL: {"graph": GRAPH, "functions": FUNCTION},
    GRAPH: {"node": NODE, "initializer": TENSOR},
    FUNCTION: {"node": NODE},
    NODE: {"attribute": ATTRIBUTE},
    ATTRIBUTE: {"t": TENSOR, "tensors": TENSOR, "g": GRAPH, "graphs": GRAPH},
    TENSOR: {},
}
_CHILDREN = {kind: {_MESSAGES[kind].DESCRIPTOR.fields_by_name[name].number: child
                    for name, child in nested.items()} for kind, nested in _NESTED.items()}
DATA_FIELDS = frozenset(TensorProto.DESCRIPTOR.fields_by_name[name].number for name in (
    "float_data", "int32_data", "string_data", "int64_data", "raw_data", "double_data",
    "uint64_data"))
SHAPE_TYPES = frozenset({TensorProto.INT32, TensorProto.INT64})


class _Corrupt(Exception):
    """The bytes are not a well-formed protobuf message."""


def keeps_values(tensor: TensorProto) -> bool:
    """Whether a large tensor's values stay: an integer vector or scalar shape inference reads."""
    return tensor.data_type in SHAPE_TYPES and len(tensor.dims) <= 1


# ------------------------------------------------------------------ protobuf's wire format
def _varint(stream: BinaryIO) -> int:
    result = shift = 0
    while True:
        byte = stream.read(1)
        if not byte or shift > 63:
            raise _Corrupt("a number runs past the end")
        result |= (byte[0] & 0x7F) << shift
        if byte[0] < 0x80:
            return result
        shift += 7


def encode_varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def fields(stream: BinaryIO, end: int) -> Iterator[tuple[int, int, int, int]]:
    """``(number, start, payload, stop)`` of each field from the stream's position to ``end``.

    ``stream[start:stop]`` is the whole field, ``stream[payload:stop]`` a
    length-delimited field's contents. The caller may read or seek freely:
    the next field is read from ``stop``.
    """
    start = stream.tell()
    while start < end:
        key = _varint(stream)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise _Corrupt("field number 0")
        if wire == LEN:
            size = _varint(stream)
        elif wire == VARINT:
            _varint(stream)
            size = 0
        elif wire in (I64, I32):
            size = 8 if wire == I64 else 4
        else:
            raise _Corrupt(f"wire type {wire} of field {number}")
        payload = stream.tell()
        stop = payload + size
        if stop > end:
            raise _Corrupt(f"field {number} runs past the end of its message")
        yield number, start, payload, stop
        stream.seek(stop)
        start = stop


def _read(stream: BinaryIO, start: int, stop: int) -> bytes:
    stream.seek(start)
    data = stream.read(stop - start)
    if len(data) != stop - start:
        raise _Corrupt("the file ends early")
    return data


def _stripped(stream: BinaryIO, kind: str, end: int) -> bytes:
    """The message from the stream's position to ``end``, without large tensors' data."""
    out = bytearray()
    children = _CHILDREN[kind]
    skipped: list[tuple[int, int]] = []
    for number, start, payload, stop in fields(stream, end):
        child = children.get(number)
        if kind == TENSOR and number in DATA_FIELDS:
            skipped.append((start, stop))
        elif child is not None and stop - payload > INLINE:
            stream.seek(payload)
            inner = _stripped(stream, child, stop)
            out += encode_varint(number << 3 | LEN) + encode_varint(len(inner)) + inner
        else:
            out += _read(stream, start, stop)
    if skipped and keeps_values(TensorProto.FromString(bytes(out))):
        for start, stop in skipped:
            out += _read(stream, start, stop)
    return bytes(out)


# ------------------------------------------------------------------ a model in memory
def _repeated(descriptor) -> bool:
    if hasattr(type(descriptor), "is_repeated"):  # protobuf 6: label() is deprecated
        return descriptor.is_repeated
    return descriptor.label == descriptor.LABEL_REPEATED


def copy_fields(source, target, skip: set[int] | frozenset[int]) -> None:
    """Copy ``source``'s set fields into ``target`` but those numbered in ``skip``."""
    for descriptor, value in source.ListFields():
        if descriptor.number in skip:
            continue
        if _repeated(descriptor):
            getattr(target, descriptor.name).extend(value)
        elif descriptor.type == descriptor.TYPE_MESSAGE:
            getattr(target, descriptor.name).CopyFrom(value)
        else:
            setattr(target, descriptor.name, value)


def _copy(message, kind: str):
    """A copy of ``message`` (of ``kind``) whose large tensors have no data."""
    copy = type(message)()
    if kind == TENSOR:
        bits = ELEMENT_BITS.get(message.data_type, 64)
        count = 1
        for dim in message.dims:
            count *= dim
        small = count * bits <= INLINE * 8
        copy_fields(message, copy, set() if small or keeps_values(message) else DATA_FIELDS)
        return copy
    children = _CHILDREN[kind]
    copy_fields(message, copy, set(children))
    for descriptor, value in message.ListFields():
        child = children.get(descriptor.number)
        if child is None:
            continue
        if _repeated(descriptor):
            getattr(copy, descriptor.name).extend(_copy(item, child) for item in value)
        else:
            getattr(copy, descriptor.name).CopyFrom(_copy(value, child))
    return copy


def weightless_copy(model: ModelProto) -> ModelProto:
    """A copy of ``model`` without large tensors' data (see the module docstring)."""
    return _copy(model, MODEL)


# ------------------------------------------------------------------ external data read back
def _tensors(graph: GraphProto) -> Iterator[TensorProto]:
    """Every tensor of ``graph`` and its subgraphs: initializers and node attributes."""
    yield from graph.initializer
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.HasField("t"):
                yield attribute.t
            yield from attribute.tensors
            for body in (*([attribute.g] if attribute.HasField("g") else []),
                         *attribute.graphs):
                yield from _tensors(body)


def _external_values(tensor: TensorProto, source: str) -> bytes:
    """The bytes of ``tensor``'s external data, read alone from the model's folder."""
    info = {entry.key: entry.value for entry in tensor.external_data}
    location = info.get("location", "")
    folder = os.path.realpath(os.path.dirname(os.path.abspath(source)))
    path = os.path.realpath(os.path.join(folder, location))
    if not location or os.path.isabs(location) or os.path.commonpath([folder, path]) != folder:
        raise ProblemError(f"tensor {tensor.name!r}: external data location {location!r} is not "
                           f"a file in the model's folder", file=source)
    count = 1
    for dim in tensor.dims:
        count *= dim
    size = count * ELEMENT_BITS[tensor.data_type] // 8
    try:
        offset = int(info.get("offset", 0))
        with open(path, "rb") as handle:
            handle.seek(offset)
            data = handle.read(size)
    except (OSError, ValueError) as error:
        raise ProblemError(f"tensor {tensor.name!r}: cannot read its external data "
                           f"{location!r}: {error}", file=source) from None
    if len(data) != size:
        raise ProblemError(f"tensor {tensor.name!r}: external data {location!r} holds "
                           f"{len(data)} of its {size} bytes", file=source)
    return data


def read_shape_constants(model: ModelProto, source: str | None) -> None:
    """Fill in the external data of the tensors `keeps_values` keeps (``source``'s folder)."""
    if source is None:
        return  # bytes or a ModelProto: no folder to read from; shape inference will say so
    for tensor in _tensors(model.graph):
        if tensor.data_location == TensorProto.EXTERNAL and keeps_values(tensor):
            tensor.raw_data = _external_values(tensor, source)
            del tensor.external_data[:]
            tensor.data_location = TensorProto.DEFAULT


def load_weightless(model: str | os.PathLike | bytes | ModelProto
                    ) -> tuple[ModelProto, str | None]:
    """``(model without its weights' data, source)``: see the module docstring.

    The source is the file name for errors, None for bytes or a ModelProto.
    Raises `ProblemError` naming the file when it cannot be read or parsed.
    """
    import io

    if isinstance(model, ModelProto):
        return weightless_copy(model), None
    source = None if isinstance(model, bytes) else str(model)
    try:
        with (io.BytesIO(model) if isinstance(model, bytes) else open(model, "rb")) as stream:
            end = stream.seek(0, os.SEEK_END)
            stream.seek(0)
            proto = ModelProto.FromString(_stripped(stream, MODEL, end))
    except OSError as error:
        raise ProblemError(f"cannot read the model: {error.strerror or error}",
                           file=source) from None
    except Exception as error:  # _Corrupt, protobuf's DecodeError and friends
        raise ProblemError(f"not a readable ONNX model (truncated or corrupted?): {error}",
                           file=source) from None
    read_shape_constants(proto, source)
    return proto, source


__all__ = ["INLINE", "copy_fields", "encode_varint", "fields", "keeps_values", "load_weightless",
           "read_shape_constants", "weightless_copy"]
