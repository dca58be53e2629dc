"""An ExecuTorch program's bytes checked as ExecuTorch's loader checks them, before any is read.

Why: a ``.pte`` may be hostile. ExecuTorch's ``Program::load`` refuses a
program whose extended header disagrees with the file or whose flatbuffer
fails the flatbuffers verifier (``VerifyProgramBuffer``); memplan must
refuse the same files, or it plans and rewrites a program that cannot run,
and it must not let references that point many times at one table multiply
its work (a 100 KB file read as gigabytes of objects).

Steps (`verify`):

- the extended header (``eh00`` at byte 8): its length at least 32 bytes,
  ``program_size`` within the file and past the header, the segments
  (``segment_base_offset``, ``segment_data_size``) after the program and
  within the file, the base a multiple of 16 (the runtime's data alignment);
  no header: the whole file is the program, and it has no segments;
- the flatbuffer, walked from its root by the verifier's rules over every
  table of ``program.fbs`` (`SCHEMA`), read or not by memplan: every table
  and vtable inside the program and aligned, every vtable of an even length,
  every offset non-zero and forward, every vector and string inside the
  program (strings NUL-terminated), every scalar field aligned, every union
  of a known type;
- the fields the runtime requires present (`REQUIRED`), ``Program.version``
  one it loads (`VERSION`); every data segment (``Program.segments``) inside
  the segment data, and the constant segment's index into that table;
- the work is counted, one unit per table and per vector or string item
  visited: a program whose references are not shared needs at most its size
  in bytes, so past `WORK_PER_BYTE` units per byte of the program the file is
  refused before anything multiplies.

A failure is a `ProblemError` naming the file and the field
(``execution_plan[0].values[12].val.sizes``). Cost: O(units), at most
`WORK_PER_BYTE` x the program's size.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from memplan.errors import ProblemError

HEADER_MAGIC = b"eh00"
HEADER_LENGTH = 32  # ExecuTorch 1.5.1's extended header: magic, length, three uint64
DATA_ALIGNMENT = 16  # the runtime's kMinimumAlignment: where segment data must start
WORK_PER_BYTE = 2  # units of work allowed per byte of the program (1 suffices unshared)
MAX_BUFFER = (1 << 31) - 1  # FLATBUFFERS_MAX_BUFFER_SIZE

# program.fbs (ExecuTorch 1.5.1, pinned by pte_flatbuffer.SCHEMA_SHA256): per table, its
# fields in slot order, each (name, kind): a scalar's bytes (int), "string", a table's name,
# ("vector", item bytes), ("tables", name), or ("union", its member tables by type code
# from 1), whose type is the one-byte field in the slot before.
KERNEL_TYPES = ("Null", "Int", "Bool", "Double", "Tensor", "String", "IntList",
                "DoubleList", "BoolList", "TensorList", "OptionalTensorList")
INSTRUCTION_TYPES = ("KernelCall", "DelegateCall", "MoveCall", "JumpFalseCall", "FreeCall")
_CALL = (("index", 4), ("args", ("vector", 4)))
_LIST = (("items", ("vector", 4)),)
_BYTES = (("data", ("vector", 1)),)
SCHEMA: dict[str, tuple[tuple[str, object], ...]] = {
    "Program": (("version", 4), ("execution_plan", ("tables", "ExecutionPlan")),
                ("constant_buffer", ("tables", "Buffer")),
                ("backend_delegate_data", ("tables", "BackendDelegateInlineData")),
                ("segments", ("tables", "DataSegment")),
                ("constant_segment", "SubsegmentOffsets"),
                ("mutable_data_segments", ("tables", "SubsegmentOffsets")),
                ("named_data", ("tables", "NamedData"))),
    "ExecutionPlan": (("name", "string"), ("container_meta_type", "ContainerMetadata"),
                      ("values", ("tables", "EValue")), ("inputs", ("vector", 4)),
                      ("outputs", ("vector", 4)), ("chains", ("tables", "Chain")),
                      ("operators", ("tables", "Operator")),
                      ("delegates", ("tables", "BackendDelegate")),
                      ("non_const_buffer_sizes", ("vector", 8)),
                      ("non_const_buffer_device", ("tables", "NonConstBufferDevice"))),
    "ContainerMetadata": (("encoded_inp_str", "string"), ("encoded_out_str", "string")),
    "EValue": (("val_type", 1), ("val", ("union", KERNEL_TYPES))),
    "Null": (), "Int": (("int_val", 8),), "Bool": (("bool_val", 1),),
    "Double": (("double_val", 8),), "String": (("string_val", "string"),),
    "IntList": (("items", ("vector", 8)),), "DoubleList": (("items", ("vector", 8)),),
    "BoolList": (("items", ("vector", 1)),), "TensorList": _LIST, "OptionalTensorList": _LIST,
    "Tensor": (("scalar_type", 1), ("storage_offset", 4), ("sizes", ("vector", 4)),
               ("dim_order", ("vector", 1)), ("requires_grad", 1), ("data_buffer_idx", 4),
               ("allocation_info", "AllocationDetails"), ("layout", 1),
               ("shape_dynamism", 1), ("extra_tensor_info", "ExtraTensorInfo")),
    "AllocationDetails": (("memory_id", 4), ("memory_offset_low", 4),
                          ("memory_offset_high", 4)),
    "ExtraTensorInfo": (("mutable_data_segments_idx", 8), ("fully_qualified_name", "string"),
                        ("location", 1), ("device_type", 1), ("device_index", 1)),
    "Operator": (("name", "string"), ("overload", "string")),
    "Chain": (("inputs", ("vector", 4)), ("outputs", ("vector", 4)),
              ("instructions", ("tables", "Instruction")),
              ("stacktrace", ("tables", "FrameList"))),
    "Instruction": (("instr_args_type", 1), ("instr_args", ("union", INSTRUCTION_TYPES))),
    "KernelCall": _CALL, "DelegateCall": _CALL,
    "MoveCall": (("move_from", 4), ("move_to", 4)),
    "JumpFalseCall": (("cond_value_index", 4), ("destination_instruction", 4)),
    "FreeCall": (("value_index", 4),),
    "FrameList": (("items", ("tables", "Frame")),),
    "Frame": (("filename", "string"), ("lineno", 4), ("name", "string"),
              ("context", "string")),
    "BackendDelegate": (("id", "string"), ("processed", "BackendDelegateDataReference"),
                        ("compile_specs", ("tables", "CompileSpec"))),
    "BackendDelegateDataReference": (("location", 1), ("index", 4)),
    "CompileSpec": (("key", "string"), ("value", ("vector", 1))),
    "NonConstBufferDevice": (("buffer_idx", 4), ("device_type", 1), ("device_index", 1)),
    "Buffer": (("storage", ("vector", 1)),), "BackendDelegateInlineData": _BYTES,
    "DataSegment": (("offset", 8), ("size", 8)),
    "SubsegmentOffsets": (("segment_index", 4), ("offsets", ("vector", 8))),
    "NamedData": (("key", "string"), ("segment_index", 4)),
}


REQUIRED = {  # fields ExecuTorch's runtime refuses a program without
    "Program": {"execution_plan"},
    "ExecutionPlan": {"name", "values", "inputs", "outputs", "non_const_buffer_sizes"},
    "EValue": {"val"}, "Instruction": {"instr_args"}, "Tensor": {"sizes"},
    "String": {"string_val"}, **{name: {"items"} for name in (
        "IntList", "DoubleList", "BoolList", "TensorList", "OptionalTensorList")}}
VERSION = 0  # the highest Program.version ExecuTorch 1.5.1's runtime loads


@dataclass(frozen=True)
class Layout:
    """Where the parts of a verified program lie in its file."""

    program_size: int  # the flatbuffer's bytes, the extended header within
    segment_base: int  # where the segments begin (0: none)
    segment_data_size: int  # their bytes (0: none)
    work: int  # units of work the walk took (`WORK_PER_BYTE`)


class _Refused(Exception):
    """A verifier rule broken at a field (its path is added on the way up)."""

    def __init__(self, message: str):
        super().__init__(message)
        self.path: list[str] = []

    def __str__(self) -> str:
        where = "".join(self.path)
        return f"Program{where}: {self.args[0]}" if where else self.args[0]


class _Walk:
    """The verifier's walk over one flatbuffer: the rules, the path, the work counted."""

    def __init__(self, data: bytes, size: int):
        self.data, self.size = data, size
        self.work, self.limit = 0, WORK_PER_BYTE * size

    def count(self, units: int) -> None:
        self.work += units
        if self.work > self.limit:
            raise _Refused(f"more than {WORK_PER_BYTE} units of reading work per byte of the "
                           f"program ({self.size} bytes): its references point many times "
                           f"at the same data")

    def inside(self, at: int, length: int, what: str) -> None:
        if not (0 <= at <= self.size and 0 <= length <= self.size - at):
            raise _Refused(f"{what} of {length} bytes at byte {at}, past the program's end "
                           f"({self.size} bytes)")

    def aligned(self, at: int, alignment: int, what: str) -> None:
        if at % alignment:
            raise _Refused(f"{what} at byte {at}, not aligned to {alignment}")

    def scalar(self, at: int, code: str, what: str) -> int:
        width = struct.calcsize(code)
        self.aligned(at, width, what)
        self.inside(at, width, what)
        return struct.unpack_from("<" + code, self.data, at)[0]

    def offset(self, at: int, what: str) -> int:
        """The position a uoffset at ``at`` refers to (VerifyOffset)."""
        o = self.scalar(at, "I", what)
        if o == 0 or o >= 1 << 31:
            raise _Refused(f"{what}: a reference of {o} (zero or backwards)")
        self.inside(at + o, 1, what)
        return at + o

    def vector(self, at: int, width: int, what: str) -> tuple[int, int]:
        """(first item, length) of a vector or string at ``at``; its items counted."""
        length = self.scalar(at, "I", what)
        if length >= MAX_BUFFER // width:
            raise _Refused(f"{what}: a vector of {length} items")
        self.inside(at, 4 + width * length, what)
        self.count(length)
        return at + 4, length

    def string(self, at: int, what: str) -> None:
        start, length = self.vector(at, 1, what)
        self.inside(start + length, 1, what)
        if self.data[start + length] != 0:
            raise _Refused(f"{what}: a string without its terminating NUL")

    def table(self, at: int, name: str, what: str) -> None:
        """A table of schema ``name`` at ``at`` and everything it refers to."""
        self.count(1)
        vtable = at - self.scalar(at, "i", what)
        vsize = self.scalar(vtable, "H", f"{what} (its vtable)")
        self.aligned(vsize, 2, f"{what} (its vtable's length)")
        self.inside(vtable, vsize, f"{what} (its vtable)")
        for slot, (field, kind) in enumerate(SCHEMA[name]):
            field_at = struct.unpack_from("<H", self.data, vtable + 4 + 2 * slot)[0] \
                if 4 + 2 * slot < vsize else 0
            if not field_at and field in REQUIRED.get(name, ()):
                refused = _Refused(f"{name}.{field} is missing")
                refused.path.append(f".{field}")
                raise refused
            union = isinstance(kind, tuple) and kind[0] == "union"
            if not (field_at or union):
                continue
            try:
                self._field(at + field_at if field_at else None, kind, at, vtable, vsize, slot)
            except _Refused as refused:
                refused.path.insert(0, f".{field}")
                raise

    def _field(self, at: int | None, kind, table: int, vtable: int, vsize: int, slot: int) -> None:
        if isinstance(kind, int):
            self.scalar(at, "BHIQ"[kind.bit_length() - 1], "a scalar")
        elif kind == "string":
            self.string(self.offset(at, "a string"), "a string")
        elif isinstance(kind, str):
            self.table(self.offset(at, "a table"), kind, "a table")
        elif kind[0] == "vector":
            start, _ = self.vector(self.offset(at, "a vector"), kind[1], "a vector")
            self.aligned(start, min(kind[1], 8), "a vector's items")
        elif kind[0] == "tables":
            start, length = self.vector(self.offset(at, "a vector"), 4, "a vector")
            for k in range(length):
                item = start + 4 * k
                try:
                    self.table(item + struct.unpack_from("<I", self.data, item)[0],
                               kind[1], "a table")
                except _Refused as refused:
                    refused.path.insert(0, f"[{k}]")
                    raise
        else:  # a union: its type in the slot before
            type_at = struct.unpack_from("<H", self.data, vtable + 2 + 2 * slot)[0] \
                if 2 * slot + 2 < vsize else 0
            code = self.data[table + type_at] if type_at else 0
            if at is None:  # absent: REQUIRED says whether the runtime needs it
                if code:
                    raise _Refused(f"a union of type {kind[1][code - 1]} without its value")
                return
            if not 0 < code <= len(kind[1]):
                raise _Refused(f"a union of type {code}, not one of program.fbs's")
            self.table(self.offset(at, "a table"), kind[1][code - 1], "a table")


def verify(data: bytes, file: str) -> Layout:
    """The `Layout` of a program's bytes, refused unless ExecuTorch's loader would accept
    them; see the module docstring."""
    try:
        return _verify(data)
    except _Refused as refused:
        raise ProblemError(f"not a valid ExecuTorch program: {refused}", file=file) from None


def _verify(data: bytes) -> Layout:
    program_size, base, segment_bytes = len(data), 0, 0
    if data[8:12] == HEADER_MAGIC:
        length = struct.unpack_from("<I", data, 12)[0] if len(data) >= 16 else 0
        if length < HEADER_LENGTH or len(data) < 8 + HEADER_LENGTH:
            raise _Refused(f"its extended header is {length} bytes long, at least "
                           f"{HEADER_LENGTH} expected")
        program_size, base, segment_bytes = struct.unpack_from("<QQQ", data, 16)
        if not 8 + length <= program_size <= len(data):
            raise _Refused(f"its extended header's program_size {program_size} is not within "
                           f"the file ({len(data)} bytes) after the header")
        if base and not (program_size <= base and base + segment_bytes <= len(data)):
            raise _Refused(f"its extended header puts {segment_bytes} bytes of segments at "
                           f"segment_base_offset {base}: not between program_size "
                           f"{program_size} and the file's end ({len(data)} bytes)")
        if base % DATA_ALIGNMENT:
            raise _Refused(f"its extended header's segment_base_offset {base} is not a "
                           f"multiple of {DATA_ALIGNMENT}")
    if program_size > MAX_BUFFER:
        raise _Refused(f"a program of {program_size} bytes (at most {MAX_BUFFER})")
    walk = _Walk(data, program_size)
    root = walk.offset(0, "the root table")
    walk.table(root, "Program", "the root table")
    version_at = _at(data, root, 0)
    version = struct.unpack_from("<I", data, version_at)[0] if version_at else 0
    if version > VERSION:
        raise _Refused(f"Program.version {version}: ExecuTorch 1.5.1's runtime loads up to "
                       f"version {VERSION}")
    _check_segments(data, root, base, segment_bytes if base else 0)
    return Layout(program_size, base, segment_bytes if base else 0, walk.work)


def _at(data: bytes, table: int, slot: int) -> int:
    """The position of a verified table's field, or 0 when absent."""
    vtable = table - struct.unpack_from("<i", data, table)[0]
    vsize = struct.unpack_from("<H", data, vtable)[0]
    entry = 4 + 2 * slot
    return table + struct.unpack_from("<H", data, vtable + entry)[0] \
        if entry < vsize and struct.unpack_from("<H", data, vtable + entry)[0] else 0


def _items(data: bytes, table: int, slot: int) -> list[int]:
    """The tables of a verified table's vector of tables (empty when absent)."""
    at = _at(data, table, slot)
    if not at:
        return []
    start = at + struct.unpack_from("<I", data, at)[0] + 4
    length = struct.unpack_from("<I", data, start - 4)[0]
    return [start + 4 * k + struct.unpack_from("<I", data, start + 4 * k)[0]
            for k in range(length)]


def _check_segments(data: bytes, root: int, base: int, segment_bytes: int) -> None:
    """Every data segment inside the segment data; the constant segment's index in range."""
    segments = _items(data, root, 4)
    for k, segment in enumerate(segments):
        offset, size = (struct.unpack_from("<Q", data, _at(data, segment, s))[0]
                        if _at(data, segment, s) else 0 for s in (0, 1))
        if size and offset + size > segment_bytes:
            where = f"the segment data ({segment_bytes} bytes)" if base else \
                "the segment data: the file has none (no extended header, or its " \
                "segment_base_offset 0)"
            raise _Refused(f"Program.segments[{k}]: {size} bytes at offset {offset}, past "
                           f"{where}")
    constant = _at(data, root, 5)
    if constant:
        table = constant + struct.unpack_from("<I", data, constant)[0]
        index_at, offsets = _at(data, table, 0), _at(data, table, 1)
        index = struct.unpack_from("<I", data, index_at)[0] if index_at else 0
        count = struct.unpack_from("<I", data, offsets + struct.unpack_from(
            "<I", data, offsets)[0])[0] if offsets else 0
        if count > 1 and index >= len(segments):
            raise _Refused(f"Program.constant_segment.segment_index {index}, the program has "
                           f"{len(segments)} segments")
