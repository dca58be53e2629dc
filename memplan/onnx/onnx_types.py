"""Bytes per ONNX tensor: element type x shape, with symbolic dimensions bound by the user.

A planner needs an exact byte count for every tensor; a guess would give a
silently wrong plan. So every tensor's size comes from its inferred type:

- the element type gives bits per element (`ELEMENT_BITS`, every
  ``TensorProto`` type but ``STRING`` and ``UNDEFINED``); sub-byte types are
  packed as the ONNX spec says, so a tensor of n elements takes
  ``ceil(n * bits / 8)`` bytes (int4/uint4/float4: ``ceil(n / 2)``, 2-bit
  types ``ceil(n / 4)``, float6 ``ceil(6n / 8)``);
- the shape's dimensions are numbers, or symbols (``dim_param``) that the
  user binds with ``dims={"batch": 1}``;
- anything else (no type, no shape, an unbound symbol, an unknown
  dimension, strings) raises `ProblemError` naming the tensor and the
  dimension.

A zero-size tensor (a dimension of 0) has size 0; the frontend leaves it out
of the arena. O(rank) per tensor.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from onnx import TensorProto, TypeProto

from memplan.errors import ProblemError

_T = TensorProto
ELEMENT_BITS: dict[int, int] = {
    _T.FLOAT: 32, _T.UINT8: 8, _T.INT8: 8, _T.UINT16: 16, _T.INT16: 16, _T.INT32: 32,
    _T.INT64: 64, _T.BOOL: 8, _T.FLOAT16: 16, _T.DOUBLE: 64, _T.UINT32: 32, _T.UINT64: 64,
    _T.COMPLEX64: 64, _T.COMPLEX128: 128, _T.BFLOAT16: 16,
    _T.FLOAT8E4M3FN: 8, _T.FLOAT8E4M3FNUZ: 8, _T.FLOAT8E5M2: 8, _T.FLOAT8E5M2FNUZ: 8,
}
# Types newer than the oldest onnx we support (1.16) join when this onnx knows them.
for _name, _bits in (("UINT4", 4), ("INT4", 4), ("FLOAT4E2M1", 4), ("FLOAT8E8M0", 8),
                     ("UINT2", 2), ("INT2", 2), ("FLOAT6E2M3", 6), ("FLOAT6E3M2", 6)):
    if hasattr(_T, _name):
        ELEMENT_BITS[getattr(_T, _name)] = _bits


def type_name(elem_type: int) -> str:
    """``FLOAT``, ``INT4``, ... or the number when this onnx does not know it."""
    try:
        return _T.DataType.Name(elem_type)
    except ValueError:
        return str(elem_type)


def tensor_bytes(elem_type: int, count: int, tensor: str, *, source: str | None = None) -> int:
    """Bytes that ``count`` packed elements of ``elem_type`` take."""
    bits = ELEMENT_BITS.get(elem_type)
    if bits is None:
        why = ("strings have no fixed size" if elem_type == _T.STRING
               else "no element type" if elem_type == _T.UNDEFINED
               else f"unknown element type {type_name(elem_type)}")
        raise ProblemError(f"tensor {tensor!r}: {why}", file=source)
    return math.ceil(count * bits / 8)


@dataclass(frozen=True)
class TensorType:
    """The element type and concrete shape of one tensor, and its size in bytes."""

    elem_type: int
    shape: tuple[int, ...]
    size: int  # bytes, packed; 0 for a zero-size tensor

    @property
    def count(self) -> int:
        return math.prod(self.shape)


def tensor_type(name: str, type_proto: TypeProto | None, dims: Mapping[str, int], *,
                source: str | None = None, hint: str = "",
                free: Collection[str] | None = None) -> TensorType:
    """The concrete type of tensor ``name`` from its (inferred) ``type_proto``.

    ``dims`` binds symbolic dimensions; ``hint`` is appended to errors (why
    shape inference may have failed). Raises `ProblemError` naming the tensor
    and the dimension when a size is unknown. ``free`` are the symbols of the
    graph inputs (the user's to bind); any other symbol was named by shape
    inference (default: those ONNX names ``unk__N``).
    """
    def fail(message: str):
        raise ProblemError(f"tensor {name!r}: {message}{hint}", file=source)

    if type_proto is None or not type_proto.HasField("tensor_type"):
        kind = "no inferred type" if type_proto is None or type_proto.WhichOneof("value") is None \
            else f"a {type_proto.WhichOneof('value')} type, not a tensor"
        fail(f"{kind}; memplan plans tensors of known shape only")
    tensor = type_proto.tensor_type
    if not tensor.HasField("shape"):
        fail("no inferred shape")
    shape = []
    for axis, dim in enumerate(tensor.shape.dim):
        if dim.HasField("dim_value"):
            if dim.dim_value < 0:
                fail(f"dimension {axis} is negative ({dim.dim_value})")
            shape.append(dim.dim_value)
        elif dim.HasField("dim_param"):
            inferred = dim.dim_param.startswith("unk__") if free is None \
                else dim.dim_param not in free
            if inferred and dim.dim_param not in dims:
                fail(f"dimension {axis} is unknown after shape inference (it named it "
                     f"{dim.dim_param!r}): it depends on the data, or on a computation shape "
                     f"inference cannot follow; bind it with dims={{{dim.dim_param!r}: ...}}")
            if dim.dim_param not in dims:
                fail(f"dimension {axis} is the unbound symbol {dim.dim_param!r}; bind it with "
                     f"dims={{{dim.dim_param!r}: ...}}")
            shape.append(int(dims[dim.dim_param]))
        else:
            fail(f"dimension {axis} is unknown after shape inference")
    count = math.prod(shape)
    return TensorType(tensor.elem_type, tuple(shape),
                      tensor_bytes(tensor.elem_type, count, name, source=source))
