"""ONNX models without their weights: all that memory planning reads of a model.

A plan needs every tensor's element type and shape, and the values of the
few constants that shape inference reads (a Reshape's target shape, a
Slice's starts and ends, Resize's scales, Range's bounds, axes, indices);
never a weight. Parsed whole, a 500 MB model takes gigabytes (the protobuf,
copies of it, shape inference's serialised input), so:

- `load_weightless` walks a file's protobuf fields (in C, ``_onnx_strip.c``;
  in Python when the extension is not built). A message of at most `INLINE`
  bytes is kept whole (nodes, value infos, small tensors); the model, its
  graph and larger nodes, attributes and tensors are entered, and a large
  tensor's data fields (``raw_data``, ``float_data``, ...) are skipped. The
  rest is parsed by protobuf. Memory: the graph without its weights' data;
- a tensor keeps its values when `keeps_values` says shape inference may
  read them: at most `INLINE` bytes of data, or an INT32 or INT64 vector or
  scalar of at most `SHAPE_VALUES` elements (ONNX's data propagation parses
  every such constant that a shape-computing operator reads; a larger one,
  a lookup table, is a weight). Such a tensor stored as external data is
  read alone from its file, which must be a regular file in the model's
  folder, at most `EXTERNAL_VALUES` bytes for the whole model. No other
  external data is opened;
- a ``ModelProto`` in memory is copied message by message, large tensors
  without their data (`weightless_copy`).

Dims, element types, names and external-data references stay, so shape
inference, and so the plan, are those of the full model. Sparse initializers
and training information are kept whole.
Cost: one pass over the file's bytes outside large tensors' data; memory
about 8 bytes per kept value or dimension on top of the file's own size
(docs/reference/formats.md, "Reading untrusted files").
"""

from __future__ import annotations

import os
import stat
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
from memplan.onnx.onnx_types import ELEMENT_BITS

try:
    from memplan.onnx._onnx_strip import check as _kernel_check
    from memplan.onnx._onnx_strip import strip as _kernel_strip
except ImportError:  # the optional extension is not built: the walks run in Python
    _kernel_strip = _kernel_check = None

INLINE = 1024  # bytes: a message this small is kept whole (onnx's own external-data threshold)
SHAPE_VALUES = 1024  # elements: the longest integer vector kept for shape inference
EXTERNAL_VALUES = 1 << 26  # bytes: all the values read from external data, at most
MAX_DEPTH = 100  # messages nested in one another, at most (protobuf's own limit)
SMALL_FILE = 1 << 20  # bytes: a model file this small is read whole, a larger one mapped
PARSED_FACTOR, PARSED_EXTRA = 32, 1 << 28  # a model parsed takes at most 32 x its file + 256 MiB
VARINT, I64, LEN, I32 = 0, 1, 2, 5  # protobuf wire types

MODEL, GRAPH, NODE, ATTRIBUTE, TENSOR, FUNCTION = (
    "model", "graph", "node", "attribute", "tensor", "function")
MESSAGES = {MODEL: ModelProto, GRAPH: GraphProto, NODE: NodeProto, ATTRIBUTE: AttributeProto,
             TENSOR: TensorProto, FUNCTION: FunctionProto}
_NESTED = {  # message -> {field name: message kind}: the path from the model to its tensors
    MODEL: {"graph": GRAPH, "functions": FUNCTION},
    GRAPH: {"node": NODE, "initializer": TENSOR},
    FUNCTION: {"node": NODE},
    NODE: {"attribute": ATTRIBUTE},
    ATTRIBUTE: {"t": TENSOR, "tensors": TENSOR, "g": GRAPH, "graphs": GRAPH},
    TENSOR: {},
}
CHILDREN = {kind: {MESSAGES[kind].DESCRIPTOR.fields_by_name[name].number: child
                    for name, child in nested.items()} for kind, nested in _NESTED.items()}
DATA_FIELDS = frozenset(TensorProto.DESCRIPTOR.fields_by_name[name].number for name in (
    "float_data", "int32_data", "string_data", "int64_data", "raw_data", "double_data",
    "uint64_data"))
SHAPE_TYPES = frozenset({TensorProto.INT32, TensorProto.INT64})
_KINDS = list(_NESTED)  # the kernel's kind numbers: the model first
_KERNEL_CHILDREN = tuple((_KINDS.index(kind), number, _KINDS.index(child))
                         for kind, children in CHILDREN.items()
                         for number, child in children.items())
_KERNEL_BITS = bytes(ELEMENT_BITS.get(t, 0) for t in range(256))


class _Corrupt(Exception):
    """The bytes are not a well-formed protobuf message."""


def elements(dims) -> int | None:
    """The number of elements of a tensor of ``dims``; None for a negative dim."""
    count = 1
    for dim in dims:
        if dim < 0:
            return None
        count *= dim
    return count


def keeps_values(tensor: TensorProto) -> bool:
    """Whether a tensor's values stay: a small one, or an integer vector shape inference reads.

    The same rule as ``keeps`` in ``_onnx_strip.c``.
    """
    count = elements(tensor.dims)
    if count is None:
        return False
    if count * ELEMENT_BITS.get(tensor.data_type, 64) <= INLINE * 8:
        return True
    return tensor.data_type in SHAPE_TYPES and len(tensor.dims) <= 1 and count <= SHAPE_VALUES


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


def _stripped(stream: BinaryIO, kind: str, end: int, depth: int = 0) -> bytes:
    """The message from the stream's position to ``end``, without large tensors' data.

    The walk of ``_onnx_strip.c`` in Python, for when the extension is not built.
    """
    if depth > MAX_DEPTH:
        raise _Corrupt("messages nested too deeply")
    out = bytearray()
    children = CHILDREN[kind]
    skipped: list[tuple[int, int]] = []
    for number, start, payload, stop in fields(stream, end):
        child = children.get(number)
        if kind == TENSOR and number in DATA_FIELDS:
            skipped.append((start, stop))
        elif child is not None and stop - payload > INLINE:
            stream.seek(payload)
            inner = _stripped(stream, child, stop, depth + 1)
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
        copy_fields(message, copy, set() if keeps_values(message) else DATA_FIELDS)
        return copy
    children = CHILDREN[kind]
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


# ------------------------------------------------------------------ files
def open_regular(path: str, what: str, source: str | None) -> BinaryIO:
    """``path`` opened for reading, refused unless it is a regular file.

    Opened without blocking first, so that a FIFO or a device named by a
    hostile model never stalls the reader; ``what`` names it in the error.
    """
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except (OSError, ValueError) as error:  # ValueError: a NUL byte in the path
        raise ProblemError(f"{what}: cannot read {path!r}: "
                           f"{getattr(error, 'strerror', None) or error}", file=source) from None
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise ProblemError(f"{what}: {path!r} is not a regular file", file=source)
        os.set_blocking(descriptor, True)
        return os.fdopen(descriptor, "rb")
    except BaseException:
        os.close(descriptor)
        raise


# ------------------------------------------------------------------ external data read back
def tensors_of(message, kind: str) -> Iterator[TensorProto]:
    """Every tensor in ``message`` (a message of ``kind``), subgraphs and functions included."""
    if kind == TENSOR:
        yield message
        return
    for descriptor, value in message.ListFields():
        child = CHILDREN[kind].get(descriptor.number)
        if child is not None:
            for item in value if _repeated(descriptor) else [value]:
                yield from tensors_of(item, child)


def external_path(tensor: TensorProto, source: str) -> tuple[str, int]:
    """``(path, offset)`` of ``tensor``'s external data: a file in the model's folder."""
    info = {entry.key: entry.value for entry in tensor.external_data}
    location = info.get("location", "")
    folder = os.path.realpath(os.path.dirname(os.path.abspath(source)))
    if not isinstance(location, str) or not location or "\0" in location \
            or os.path.isabs(location):
        path = None
    else:
        path = os.path.realpath(os.path.join(folder, location))
    if path is None or os.path.commonpath([folder, path]) != folder:
        raise ProblemError(f"tensor {tensor.name!r}: external data location {location!r} is not "
                           f"a file in the model's folder", file=source)
    offset = info.get("offset", "0")
    if not isinstance(offset, str) or not offset.isascii() or not offset.isdigit():
        raise ProblemError(f"tensor {tensor.name!r}: external data offset {offset!r} is not "
                           f"a whole number >= 0", file=source)
    return path, int(offset)


def _external_values(tensor: TensorProto, source: str) -> bytes:
    """The bytes of ``tensor``'s external data, read alone from the model's folder."""
    path, offset = external_path(tensor, source)
    size = elements(tensor.dims) * ELEMENT_BITS[tensor.data_type] // 8  # keeps_values: small
    what = f"tensor {tensor.name!r}: external data"
    with open_regular(path, what, source) as handle:
        try:
            handle.seek(offset)
            data = handle.read(size)
        except (OSError, OverflowError, ValueError) as error:  # an offset past 2^63
            raise ProblemError(f"{what} {path!r}: cannot read {size} bytes at offset "
                               f"{offset}: {getattr(error, 'strerror', None) or error}",
                               file=source) from None
    if len(data) != size:
        raise ProblemError(f"{what} {path!r} holds {len(data)} of its {size} bytes at offset "
                           f"{offset}", file=source)
    return data


def read_shape_constants(model: ModelProto, source: str | None) -> None:
    """Fill in the external data of the tensors `keeps_values` keeps (``source``'s folder).

    At most `EXTERNAL_VALUES` bytes in all: a model naming the same file
    region from many tensors cannot make the reader hold more.
    """
    if source is None:
        return  # bytes or a ModelProto: no folder to read from; shape inference will say so
    total = 0
    for tensor in tensors_of(model.graph, GRAPH):
        if tensor.data_location != TensorProto.EXTERNAL or tensor.data_type not in ELEMENT_BITS \
                or not keeps_values(tensor):
            continue
        data = _external_values(tensor, source)
        total += len(data)
        if total > EXTERNAL_VALUES:
            raise ProblemError(f"tensor {tensor.name!r}: the small tensors stored as external "
                               f"data pass {EXTERNAL_VALUES} bytes together", file=source)
        tensor.raw_data = data
        del tensor.external_data[:]
        tensor.data_location = TensorProto.DEFAULT


def _strip_file(handle: BinaryIO) -> bytes:
    """The model file's bytes without large tensors' data (`_onnx_strip.c`, or in Python)."""
    import mmap

    end = os.fstat(handle.fileno()).st_size
    if _kernel_strip is None:
        return _stripped(handle, MODEL, end)
    if end <= SMALL_FILE:  # read whole: cheaper than a mapping
        return _strip_bytes(handle.read(end))
    with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
        return _strip_bytes(data)


def _strip_bytes(data) -> bytes:
    """``data`` (a serialised model) without large tensors' data."""
    if _kernel_strip is None:
        import io

        return _stripped(io.BytesIO(data), MODEL, len(data))
    try:
        return _kernel_strip(data, _KERNEL_CHILDREN, sum(1 << n for n in DATA_FIELDS),
                             _KINDS.index(TENSOR), INLINE, SHAPE_VALUES, _KERNEL_BITS,
                             MAX_DEPTH)
    except ValueError as error:
        raise _corrupt(data, error) from None


def _schema() -> tuple[list, bytes, bytes]:
    """The tables of the kernel's ``check``: every message type a model holds (the model
    first); its text and message fields as int16 ``(type, number, child type or -1 for
    text)`` triples; and what one message of each type costs parsed (about 64 bytes and 8
    a field), as uint64."""
    from array import array

    from google.protobuf.descriptor import FieldDescriptor

    types, rows = [ModelProto.DESCRIPTOR], []
    for descriptor in types:  # grows while it is walked: breadth first
        for field in descriptor.fields:
            if field.type == FieldDescriptor.TYPE_STRING:
                rows.append((types.index(descriptor), field.number, -1))
            elif field.type == FieldDescriptor.TYPE_MESSAGE:
                if field.message_type not in types:
                    types.append(field.message_type)
                rows.append((types.index(descriptor), field.number,
                             types.index(field.message_type)))
    costs = array("Q", (64 + 8 * len(descriptor.fields) for descriptor in types))
    return types, array("h", (n for row in rows for n in row)).tobytes(), costs.tobytes()


def _bytes_text(message, path: tuple[str, ...] = ()) -> tuple[str, ...] | None:
    """The path to a text field of ``message`` that protobuf left as bytes (not UTF-8)."""
    from google.protobuf.descriptor import FieldDescriptor

    for field, value in message.ListFields():
        items = value if _repeated(field) else [value]
        if field.type == FieldDescriptor.TYPE_STRING:
            if any(type(item) is bytes for item in items):
                return (*path, field.name)
        elif field.type == FieldDescriptor.TYPE_MESSAGE:
            for item in items:
                found = _bytes_text(item, (*path, field.name))
                if found:
                    return found
    return None


def _refuse_text(path, source: str | None) -> None:
    if path:
        raise ProblemError(f"field {'.'.join(path)}: text that is not UTF-8", file=source)


def _walk(data) -> tuple[str | None, tuple[str, ...], int]:
    """The kernel's ``check`` of ``data``: ``(finding, field path, cost of the messages)``."""
    global _SCHEMA
    if _SCHEMA is None:
        _SCHEMA = _schema()
    types, rows, costs = _SCHEMA
    finding, found, cost = _kernel_check(data, rows, costs)
    path = tuple(getattr(types[kind].fields_by_number.get(number), "name", f"#{number}")
                 for kind, number in found or ())  # #N: a field number unknown to ONNX
    return finding, path, cost


def _corrupt(data, error: Exception) -> _Corrupt:
    """``error`` (bytes that are no protobuf message) with the field where it is, if found."""
    finding, path, _ = _walk(data)
    where = f"field {'.'.join(path)}: " if finding == "corrupt" and path else ""
    return _Corrupt(f"{where}{error}")


def _check(data: bytes, size: int, source: str | None) -> None:
    """Refuse ``data`` (a model without weights, from a file of ``size`` bytes) before
    protobuf parses it: a text field that is not UTF-8 (ONNX's schema is proto2, whose text
    protobuf does not check: it would come back as bytes and surface as a name anywhere
    later), or more than ``PARSED_FACTOR * size + PARSED_EXTRA`` bytes once parsed (a file
    of empty messages: two bytes each in the file, a hundred and more parsed)."""
    if _kernel_check is None:
        return  # the text is checked after parsing (`_bytes_text`); memory is not bounded
    finding, path, cost = _walk(data)
    if finding == "corrupt":
        raise _Corrupt(f"field {'.'.join(path) or 'model'}: not a well-formed message")
    _refuse_text(path if finding == "text" else None, source)
    parsed = cost + 8 * len(data)
    if parsed > PARSED_FACTOR * size + PARSED_EXTRA:
        raise ProblemError(f"not planned: its messages would take about {parsed >> 20} MiB "
                           f"once parsed, more than {PARSED_FACTOR} times the file's "
                           f"{size} bytes + {PARSED_EXTRA >> 20} MiB (a file of empty "
                           f"messages?)", file=source)


_SCHEMA: tuple[list, bytes, bytes] | None = None


def load_weightless(model: str | os.PathLike | bytes | ModelProto
                    ) -> tuple[ModelProto, str | None]:
    """``(model without its weights' data, source)``: see the module docstring.

    The source is the file name for errors, None for bytes or a ModelProto.
    Raises `ProblemError` naming the file when it cannot be read or parsed.
    """
    if isinstance(model, ModelProto):
        try:
            return weightless_copy(model), None
        except UnicodeError:  # a text field parsed from bytes that are not UTF-8
            _refuse_text(_bytes_text(model), None)
            raise
    source = None if isinstance(model, bytes) else os.fspath(model)
    try:
        if isinstance(model, bytes):
            size, stripped = len(model), _strip_bytes(model)
        else:
            with open_regular(source, "the model", source) as handle:
                size, stripped = os.fstat(handle.fileno()).st_size, _strip_file(handle)
        _check(stripped, size, source)
        proto = ModelProto.FromString(stripped)
    except ProblemError:
        raise
    except OSError as error:
        raise ProblemError(f"cannot read the model: {error.strerror or error}",
                           file=source) from None
    except Exception as error:  # _Corrupt, protobuf's DecodeError and friends
        raise ProblemError(f"not a readable ONNX model (truncated or corrupted?): {error}",
                           file=source) from None
    external = b"location" in stripped  # no tensor names a file otherwise: no walk
    del stripped
    if _kernel_check is None:
        _refuse_text(_bytes_text(proto), source)
    if external:
        read_shape_constants(proto, source)
    return proto, source


__all__ = ["CHILDREN", "EXTERNAL_VALUES", "INLINE", "MESSAGES", "SHAPE_TYPES", "SHAPE_VALUES",
           "copy_fields", "elements", "encode_varint", "external_path", "fields",
           "keeps_values", "load_weightless", "open_regular", "read_shape_constants",
           "tensors_of", "weightless_copy"]
