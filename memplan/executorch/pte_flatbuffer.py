"""The ExecuTorch program file (``.pte``): what memplan reads of it, and its offsets rewritten.

Why: ExecuTorch's own Python serialisation imports torch and
``executorch.exir`` (10 s and more of CPU) to read a file that is a
flatbuffer of one schema (``program.fbs``, file identifier ``ET12``): the
few tables memplan needs are read here with the ``flatbuffers`` runtime, and
a re-planned program is the original's bytes with a few references changed.

The file (ExecuTorch's ``exir/_serialize/_program.py``): the flatbuffer
(root offset, identifier ``ET12``, then, when the program has segments, the
extended header ``eh00`` at byte 8: its length, ``program_size``,
``segment_base_offset``, ``segment_data_size``, little-endian), padding, and
the segments (constants, delegate blobs), each at ``segment_base_offset``
plus its offset.

Steps:

- `read_program`: refuse a file whose identifier is not `FILE_IDENTIFIER`
  (another schema: the field slots below are ``program.fbs``'s of
  ExecuTorch 1.5.1, whose hash `SCHEMA_SHA256` pins); check the bytes as
  ExecuTorch's loader does, within a work bound (`memplan.executorch.
  pte_verify`: nothing below reads outside the program); read every execution
  plan's name, values (tensors with their scalar type, sizes, dim order,
  allocation and whether they are stored constants; tensor lists; scalars, an
  ``IntList`` with its items), inputs, outputs, chains of instructions,
  operators, delegates and arena sizes; refuse what the runtime refuses when
  it loads a method (`_check_indices`: an index past its table, a tensor
  outside its arena or its constant data, list arguments that multiply past
  the work bound);
- `with_allocations`: a flatbuffer's references point forward, so each moved
  tensor gets a new ``AllocationDetails`` table (all three fields present,
  one shared vtable) appended after the program, and its ``allocation_info``
  reference is pointed at it; arena sizes are patched in their vector; the
  segments move back by a multiple of the largest power of two dividing
  their base offset (each keeps its alignment) when the program no longer
  fits before them, and the extended header gets the new sizes. Every other
  byte stays as it was.

Cost: O(file's tables) to read, O(file size) to write.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field

from memplan.errors import ProblemError, require
from memplan.executorch.pte_verify import HEADER_MAGIC, WORK_PER_BYTE, verify

FILE_IDENTIFIER = b"ET12"  # program.fbs's file_identifier
SCHEMA_SHA256 = {  # ExecuTorch 1.5.1's schema, whose field slots this module reads
    "program.fbs": "da7b809b497abea70e813cb23f39e46b6c76e2501d66ef3e91d4f9e1c9cfd62f",
    "scalar_type.fbs": "a4c83c25ee7da8eedf61f04fe3df979e5866035763f0ee8d3ed68463e3baad8f",
}
SCALAR_TYPES = {  # scalar_type.fbs (8-10: c10's complex types): (name, bytes per item)
    0: ("BYTE", 1), 1: ("CHAR", 1), 2: ("SHORT", 2), 3: ("INT", 4), 4: ("LONG", 8),
    5: ("HALF", 2), 6: ("FLOAT", 4), 7: ("DOUBLE", 8), 8: ("COMPLEX32", 4),
    9: ("COMPLEX64", 8), 10: ("COMPLEX128", 16), 11: ("BOOL", 1), 12: ("QINT8", 1),
    13: ("QUINT8", 1), 14: ("QINT32", 4), 15: ("BFLOAT16", 2), 16: ("QUINT4X2", 1),
    17: ("QUINT2X4", 1), 22: ("BITS16", 2), 23: ("FLOAT8E5M2", 1), 24: ("FLOAT8E4M3FN", 1),
    25: ("FLOAT8E5M2FNUZ", 1), 26: ("FLOAT8E4M3FNUZ", 1), 27: ("UINT16", 2),
    28: ("UINT32", 4), 29: ("UINT64", 8)}
VALUE_KINDS = ("NONE", "Null", "Int", "Bool", "Double", "Tensor", "String", "IntList",
               "DoubleList", "BoolList", "TensorList", "OptionalTensorList")  # KernelTypes
INSTRUCTION_KINDS = ("NONE", "KernelCall", "DelegateCall", "MoveCall", "JumpFalseCall",
                     "FreeCall")  # InstructionArguments


@dataclass(frozen=True)
class Allocation:
    """Where a planned tensor lives: its arena (memory id) and offset."""

    memory_id: int
    offset: int
    reference: int  # file position of the tensor's allocation_info reference (rewritten)


@dataclass(frozen=True)
class Tensor:
    scalar_type: str  # ScalarType's name
    item_bytes: int  # 0: a type memplan does not know
    sizes: tuple[int, ...]
    allocation: Allocation | None  # None: a constant, or memory the runtime provides
    stored: bool = False  # a constant: data in the program (data_buffer_idx > 0) or outside it
    dim_order: tuple[int, ...] = ()
    data_index: int = 0  # data_buffer_idx: its constant data in the program (0: none)


@dataclass(frozen=True)
class TensorList:
    items: tuple[int, ...]  # value indices (-1: none, in an optional list)
    optional: bool = False  # an OptionalTensorList


@dataclass(frozen=True)
class Scalar:
    kind: str  # Int, Bool, Double, String, Null, IntList, DoubleList, BoolList
    value: object = None  # an Int's, Bool's or Double's value; an IntList's value indices


@dataclass(frozen=True)
class Instruction:
    kind: str  # KernelCall, DelegateCall, MoveCall, JumpFalseCall, FreeCall
    index: int = -1  # a kernel call's operator, a delegate call's delegate
    args: tuple[int, ...] = ()  # value indices


@dataclass
class ExecutionPlan:
    """One method of the program: what memplan reads of its ``ExecutionPlan`` table."""

    name: str
    values: list[Tensor | TensorList | Scalar]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    chains: list[list[Instruction]]
    operators: list[tuple[str, str]]  # (name, overload)
    delegates: list[str]  # backend ids
    arena_sizes: tuple[int, ...]  # non_const_buffer_sizes: per memory id, in bytes
    arena_sizes_at: int  # file position of that vector's first item

    def planned(self) -> bool:
        """Whether some tensor lives in an arena the runtime allocates (constant methods,
        such as ExecuTorch's ``get_max_seq_len``, have none)."""
        return any(isinstance(v, Tensor) and v.allocation is not None for v in self.values)


@dataclass(eq=False)
class Program:
    """A ``.pte`` file's bytes and its execution plans (hashed by identity: `read_program`
    gives the same object for the same file and bytes)."""

    data: bytes
    file: str
    plans: list[ExecutionPlan] = field(default_factory=list)
    program_size: int = 0  # the flatbuffer's bytes, the extended header within
    segment_base: int = 0  # where the segments begin (0: none)


def _table(buf: bytes, pos: int):
    from flatbuffers.table import Table

    return Table(buf, pos)


def _ref(t, slot: int):
    """The table a field refers to, or None."""
    o = t.Offset(4 + 2 * slot)
    return _table(t.Bytes, t.Indirect(t.Pos + o)) if o else None


def _vector(t, slot: int) -> tuple[int, int]:
    """(start, length) of a vector field; (0, 0) when absent."""
    o = t.Offset(4 + 2 * slot)
    return (t.Vector(o), t.VectorLen(o)) if o else (0, 0)


def _numbers(t, slot: int, code: str) -> tuple:
    start, length = _vector(t, slot)
    return struct.unpack_from(f"<{length}{code}", t.Bytes, start)


def _tables(t, slot: int) -> list:
    start, length = _vector(t, slot)
    return [_table(t.Bytes, t.Indirect(start + 4 * k)) for k in range(length)]


def _string(t, slot: int) -> str:
    o = t.Offset(4 + 2 * slot)
    return t.String(t.Pos + o).decode() if o else ""  # flatbuffers' strings are UTF-8


def _scalar(t, slot: int, code: str, default=0):
    o = t.Offset(4 + 2 * slot)
    return struct.unpack_from(f"<{code}", t.Bytes, t.Pos + o)[0] if o else default


def _union(t, slot: int, kinds: tuple[str, ...]):
    """(kind, table) of a union field (its type at ``slot``, its value at ``slot + 1``)."""
    return kinds[_scalar(t, slot, "B")], _ref(t, slot + 1)  # verified: a known type


def _value(t) -> Tensor | TensorList | Scalar:
    kind, val = _union(t, 0, VALUE_KINDS)
    if kind == "Tensor":
        name, width = SCALAR_TYPES.get(_scalar(val, 0, "b"), (f"type {_scalar(val, 0, 'b')}", 0))
        info = _ref(val, 6)
        allocation = None if info is None else Allocation(
            _scalar(info, 0, "I"), _scalar(info, 1, "I") + (_scalar(info, 2, "I") << 32),
            val.Pos + val.Offset(4 + 2 * 6))
        extra = _ref(val, 9)  # ExtraTensorInfo: its location, 1 = EXTERNAL
        external = extra is not None and _scalar(extra, 2, "b") == 1
        index = 0 if external else _scalar(val, 5, "I")
        return Tensor(name, width, _numbers(val, 2, "i"), allocation, index > 0 or external,
                      _numbers(val, 3, "B"), index)
    if kind in ("TensorList", "OptionalTensorList"):
        return TensorList(_numbers(val, 0, "i"), kind == "OptionalTensorList")
    if kind == "IntList":  # items: the Int values of its sizes, some computed at run time
        return Scalar(kind, _numbers(val, 0, "q"))
    codes = {"Int": "q", "Bool": "?", "Double": "d"}
    return Scalar(kind, _scalar(val, 0, codes[kind]) if kind in codes else None)


def _instruction(t) -> Instruction:
    kind, call = _union(t, 0, INSTRUCTION_KINDS)
    if kind in ("KernelCall", "DelegateCall"):
        return Instruction(kind, _scalar(call, 0, "i"), _numbers(call, 1, "i"))
    return Instruction(kind)


def _plan(t) -> ExecutionPlan:
    return ExecutionPlan(
        _string(t, 0), [_value(v) for v in _tables(t, 2)], _numbers(t, 3, "i"),
        _numbers(t, 4, "i"),
        [[_instruction(i) for i in _tables(chain, 2)] for chain in _tables(t, 5)],
        [(_string(op, 0), _string(op, 1)) for op in _tables(t, 6)],
        [_string(d, 0) for d in _tables(t, 7)], _numbers(t, 8, "q"), _vector(t, 8)[0])


def read_program(data: bytes, file: str) -> Program:
    """The `Program` of a ``.pte`` file's bytes; see the module docstring. The programs
    read last are kept: a command reading the same file again (its bytes compared) gets
    the same object."""
    for program in _RECENT:
        if program.file == file and program.data == data:
            return program
    program = _read(data, file)
    _RECENT[:] = [program, *_RECENT[:1]]
    return program


_RECENT: list[Program] = []  # the last two programs read


def _read(data: bytes, file: str) -> Program:
    if data[4:6] != FILE_IDENTIFIER[:2]:
        raise ProblemError("not an ExecuTorch program (no 'ET' file identifier)", file=file)
    if data[4:8] != FILE_IDENTIFIER:
        found = data[4:8].decode("ascii", "replace")
        raise ProblemError(f"an ExecuTorch program of schema {found!r}; memplan reads "
                           f"{FILE_IDENTIFIER.decode()} (ExecuTorch 1.5.1's program.fbs)",
                           file=file)
    require("flatbuffers", "executorch", "reading .pte files")
    layout = verify(data, file)  # every reference below is inside the program
    program = Program(data, file, program_size=layout.program_size,
                      segment_base=layout.segment_base)
    root = _table(data, struct.unpack_from("<I", data, 0)[0])
    try:
        program.plans = [_plan(plan) for plan in _tables(root, 1)]
    except UnicodeDecodeError as error:
        raise ProblemError(f"not a valid ExecuTorch program: a name that is not UTF-8 "
                           f"({error.reason})", file=file) from None
    fits = _constant_data(root)
    for k, plan in enumerate(program.plans):
        try:
            _check_indices(plan, WORK_PER_BYTE * layout.program_size, fits)
        except ValueError as error:
            raise ProblemError(f"execution plan {k} ({shown(plan.name)}): {error}",
                               file=file) from None
    return program


def shown(text: str, limit: int = 60) -> str:
    """A name read from the file as a message shows it: quoted, control characters
    escaped, cut after ``limit`` characters."""
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}... ({len(text)} characters)"


def listed(names: list[str], limit: int = 5) -> str:
    """Names read from the file as a message lists them: each `shown`, the first few."""
    more = f" and {len(names) - limit} more" if len(names) > limit else ""
    return ", ".join(shown(name) for name in names[:limit]) + more


def _constant_data(root):
    """Whether constant ``index`` holds ``nbytes`` as the runtime checks it: in the constant
    segment (its offset plus the bytes within the segment), or inline in the program
    (``constant_buffer``: its storage no larger)."""
    segment = _ref(root, 5)
    offsets = _numbers(segment, 1, "Q") if segment is not None else ()
    if len(offsets) > 1:
        segments = _tables(root, 4)
        index = _scalar(segment, 0, "I")  # in range: pte_verify checked it
        size = _scalar(segments[index], 1, "Q")
        return lambda k, nbytes: k < len(offsets) and offsets[k] + nbytes <= size
    storage = [_vector(buffer, 0)[1] for buffer in _tables(root, 2)]
    return lambda k, nbytes: k < len(storage) and storage[k] <= nbytes


def _check_indices(plan: ExecutionPlan, limit: int, fits) -> None:
    """Refuse what ExecuTorch's runtime refuses when it loads the method, of what memplan
    reads: an index past the table it points into, a tensor outside its arena; and a
    chain whose arguments, lists expanded, exceed ``limit`` (rebuilding its lifetimes
    visits each: arguments pointing many times at one long list multiply the work)."""
    count = len(plan.values)
    work = 0

    def within(indices, what: str, low: int = 0) -> None:
        bad = [v for v in indices if not low <= v < count]
        if bad:
            raise ValueError(f"{what}: value index {bad[0]}, the plan has {count} values")

    if any(size < 0 for size in plan.arena_sizes):
        raise ValueError(f"non_const_buffer_sizes {list(plan.arena_sizes)[:8]}: a negative "
                         f"arena size")
    within(plan.inputs, "inputs")
    within(plan.outputs, "outputs")
    for v, value in enumerate(plan.values):
        if isinstance(value, TensorList):
            what = f"value {v} (a tensor list)"
            within(value.items, what, -1 if value.optional else 0)
            if not value.optional and not all(isinstance(plan.values[i], Tensor)
                                              for i in value.items):
                raise ValueError(f"{what}: an item that is no tensor")
        elif isinstance(value, Scalar) and value.kind == "IntList":
            within(value.value, f"value {v} (an int list)")
            if not all(getattr(plan.values[i], "kind", "") == "Int" for i in value.value):
                raise ValueError(f"value {v} (an int list): an item that is no Int")
        elif isinstance(value, Tensor):
            _check_tensor(plan, v, value, fits)
    for c, chain in enumerate(plan.chains):
        for i, call in enumerate(chain):
            table = {"KernelCall": plan.operators, "DelegateCall": plan.delegates}.get(
                call.kind)
            if table is None:
                continue
            what = f"chain {c}, instruction {i} ({call.kind})"
            if not 0 <= call.index < len(table):
                kind = "op_index" if call.kind == "KernelCall" else "delegate_index"
                raise ValueError(f"{what}: {kind} {call.index}, the plan has {len(table)} "
                                 f"{'operators' if call.kind == 'KernelCall' else 'delegates'}")
            within(call.args, f"{what}'s arguments")
            work += sum(1 + len(_listed(plan.values[a])) for a in call.args)
            if work > limit:
                raise ValueError(f"its instructions' arguments, lists expanded, exceed "
                                 f"{WORK_PER_BYTE} per byte of the program: they point many "
                                 f"times at the same lists")


def _listed(value) -> tuple[int, ...]:
    """The value indices a list value holds (none for any other value)."""
    if isinstance(value, TensorList):
        return value.items
    return value.value if isinstance(value, Scalar) and value.kind == "IntList" else ()


def _check_tensor(plan: ExecutionPlan, v: int, tensor: Tensor, fits) -> None:
    if not tensor.item_bytes:
        raise ValueError(f"value {v}: a tensor of scalar type {tensor.scalar_type.split()[-1]}, "
                         f"not one of scalar_type.fbs's")
    if any(size < 0 for size in tensor.sizes) or \
            math.prod(tensor.sizes) * tensor.item_bytes >= 1 << 63:
        raise ValueError(f"value {v}: a tensor of sizes {list(tensor.sizes)[:8]}")
    if sorted(tensor.dim_order) != list(range(len(tensor.sizes))):
        raise ValueError(f"value {v}: dim_order {list(tensor.dim_order)[:8]} is no order of "
                         f"its {len(tensor.sizes)} dimensions")
    nbytes = math.prod(tensor.sizes) * tensor.item_bytes
    if tensor.data_index and not fits(tensor.data_index, nbytes):
        raise ValueError(f"value {v}: its constant data (data_buffer_idx "
                         f"{tensor.data_index}, {nbytes} bytes) is not in the program")
    allocation = tensor.allocation
    if allocation is None:
        return
    arenas = len(plan.arena_sizes)
    if not 0 < allocation.memory_id < arenas:
        raise ValueError(f"value {v}: memory id {allocation.memory_id}, the plan has arenas "
                         f"1 to {arenas - 1} (non_const_buffer_sizes)")
    end = allocation.offset + nbytes
    if end > plan.arena_sizes[allocation.memory_id]:
        raise ValueError(f"value {v}: its bytes end at {end}, past its arena (memory id "
                         f"{allocation.memory_id}, {plan.arena_sizes[allocation.memory_id]} "
                         f"bytes)")


def with_allocations(program: Program, moves: dict[int, tuple[int, int]],
                     arena_sizes: dict[int, int]) -> bytes:
    """The program's bytes with tensors moved and arenas resized: ``moves`` maps an
    allocation_info reference's position to (memory id, offset), ``arena_sizes`` an arena
    size's position to its bytes. See the module docstring."""
    data = program.data
    end = -(-program.program_size // 4) * 4
    vtable = struct.pack("<HHHHH", 10, 16, 4, 8, 12) + b"\0\0"  # three uint32 fields
    appended = bytearray(vtable)
    patched = bytearray(data[:program.program_size])
    patched += bytes(end - program.program_size)
    for reference, (memory_id, offset) in sorted(moves.items()):
        table = end + len(appended)
        appended += struct.pack("<iIII", table - end, memory_id, offset & 0xFFFFFFFF,
                                offset >> 32)
        struct.pack_into("<I", patched, reference, table - reference)
    for position, size in arena_sizes.items():
        struct.pack_into("<q", patched, position, size)
    patched += appended
    if data[8:12] == HEADER_MAGIC:
        struct.pack_into("<Q", patched, 16, len(patched))
    if not program.segment_base:
        return bytes(patched)
    base = program.segment_base
    if len(patched) > base:
        step = base & -base  # the largest power of two dividing the base: every segment's
        base += -(-(len(patched) - base) // step) * step  # alignment is kept
    struct.pack_into("<Q", patched, 24, base)
    return b"".join((patched, bytes(base - len(patched)),
                     memoryview(data)[program.segment_base:]))  # one copy of the segments
