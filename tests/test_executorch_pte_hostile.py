"""Hostile ExecuTorch programs (``.pte``): refused as ExecuTorch's loader refuses them, bounded.

The programs are exported here from small PyTorch models (`benchmarks.pte_models`)
and then corrupted: header fields, indices, names, shared references, random
bytes. Whatever memplan accepts and rewrites must behave in ExecuTorch's own
runtime exactly as the program it was given; whatever it refuses, it refuses in
one line naming the file, exit 2.
"""

from __future__ import annotations

import json
import random
import struct
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

from benchmarks.pte_models import export_pte
from memplan.cli import BAD_INPUT, OK, main
from memplan.errors import ProblemError
from memplan.executorch.executorch_pte import read_pte
from memplan.executorch.pte_flatbuffer import (
    ExecutionPlan,
    Instruction,
    Tensor,
    TensorList,
    _check_indices,
    read_program,
    shown,
)
from memplan.executorch.pte_verify import WORK_PER_BYTE, verify


@pytest.fixture(scope="module")
def programs(tmp_path_factory) -> dict[str, Path]:
    """An MLP (constants in a segment, an extended header) and a decoder whose KV cache
    lives in mutable buffers."""
    folder = tmp_path_factory.mktemp("hostile")
    paths = {}
    for name in ("mlp", "decoder"):
        paths[name] = folder / f"{name}.pte"
        paths[name].write_bytes(export_pte(name))
    return paths


def deref(data: bytes, at: int) -> int:
    return at + struct.unpack_from("<I", data, at)[0]


def field(data: bytes, table: int, slot: int) -> int | None:
    """The position of a table's field, None when the file leaves it out (its default)."""
    vtable = table - struct.unpack_from("<i", data, table)[0]
    if 4 + 2 * slot >= struct.unpack_from("<H", data, vtable)[0]:
        return None
    offset = struct.unpack_from("<H", data, vtable + 4 + 2 * slot)[0]
    return table + offset if offset else None


def items(data: bytes, table: int, slot: int) -> list[int]:
    """The tables of a table's vector of tables."""
    vector = deref(data, field(data, table, slot))
    return [deref(data, vector + 4 + 4 * k)
            for k in range(struct.unpack_from("<I", data, vector)[0])]


def first_plan(data: bytes) -> int:
    return items(data, deref(data, 0), 1)[0]  # Program.execution_plan[0]


def patched(data: bytes, at: int, code: str, value) -> bytes:
    out = bytearray(data)
    struct.pack_into(code, out, at, value)
    return bytes(out)


def one_line_refusal(capsys, *args: str) -> str:
    capsys.readouterr()  # what came before (an export's warnings)
    assert main(list(args)) == BAD_INPUT
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert all(c.isprintable() for c in err.rstrip("\n")), err
    return err


@pytest.mark.parametrize("offset, value, why", [
    (16, 64, "Program.execution_plan: a vector"),  # program_size inside the flatbuffer
    (16, 1 << 40, "program_size 1099511627776 is not within the file"),
    (24, (1 << 64) - 1, "segment_base_offset 18446744073709551615"),
    (24, 1 << 27, "segment_base_offset 134217728"),  # past the end: no 128 MiB of zeros
    (24, 0, "the segment data: the file has none"),  # the constants dropped
    (12, 0, "extended header is 0 bytes long"),
])
def test_header_fields_that_disagree_with_the_file_are_refused(
        programs, tmp_path, capsys, offset, value, why):
    bad = tmp_path / "bad.pte"
    bad.write_bytes(patched(programs["mlp"].read_bytes(), offset, "<Q" if offset > 12 else
                            "<I", value))
    with pytest.raises(ProblemError, match=r"bad\.pte: not a valid ExecuTorch program: "):
        read_pte(bad)
    out = tmp_path / "planned.pte"
    err = one_line_refusal(capsys, "solve", str(bad), "-o", str(out), "--time-limit", "1")
    assert why in err and not out.exists()


def test_a_segment_base_off_its_alignment_is_refused(programs):
    data = programs["mlp"].read_bytes()
    base = struct.unpack_from("<Q", data, 24)[0]
    with pytest.raises(ProblemError, match=f"segment_base_offset {base - 8} is not a "
                                           f"multiple of 16"):
        read_program(patched(data, 24, "<Q", base - 8), "odd.pte")


def first_kernel_call_with_an_operator_index(data: bytes) -> int:
    """The position of the op_index of the plan's first kernel call that stores one."""
    chain = items(data, first_plan(data), 5)[0]
    for instruction in items(data, chain, 2):
        call = deref(data, field(data, instruction, 1))
        if data[field(data, instruction, 0)] == 1 and field(data, call, 0):  # KernelCall
            return field(data, call, 0)
    raise AssertionError("no kernel call stores its operator index")


@pytest.mark.parametrize("index", ["past", -1])
def test_an_operator_index_past_the_table_or_negative_is_refused(programs, tmp_path, capsys,
                                                                 index):
    data = programs["mlp"].read_bytes()
    operators = len(read_program(data, "mlp.pte").plans[0].operators)
    bad = tmp_path / "bad_op.pte"
    bad.write_bytes(patched(data, first_kernel_call_with_an_operator_index(data), "<i",
                            operators if index == "past" else index))
    err = one_line_refusal(capsys, "info", str(bad))
    assert f"op_index {operators if index == 'past' else index}, the plan has {operators} " \
           f"operators" in err and "bad_op.pte: " in err


def test_names_read_from_the_file_are_escaped_and_cut_in_messages(programs, tmp_path, capsys):
    data = programs["mlp"].read_bytes()
    plan = read_program(data, "mlp.pte").plans[0]
    name = plan.operators[0][0].encode()
    escapes = (b"\x1b]0;title\x07\x1b[2J" + b"\x1b" * len(name))[:len(name)]
    at = data.index(struct.pack("<I", len(name)) + name) + 4
    bad = tmp_path / "escapes.pte"
    bad.write_bytes(data[:at] + escapes + data[at + len(name):])
    err = one_line_refusal(capsys, "info", str(bad))
    assert "\\x1b]0;title\\x07" in err and "memplan knows no schema" in err
    assert shown("\x00" * 5000) == repr("\x00" * 60) + "... (5000 characters)"


def shared_chain_program(base: bytes, chains: int, instructions: int) -> bytes:
    """``base`` (a program without segments: the flatbuffer is the whole file) with its
    first plan's chains pointed at a vector of ``chains`` references to one chain of
    ``instructions`` references to one kernel call: a few KB read as chains x instructions.
    Flatbuffer references point forward, so each part comes before what it refers to."""
    data = bytearray(base)
    chains_field = field(data, first_plan(data), 5)
    data += bytes(-len(data) % 4)

    def add(raw: bytes) -> int:
        data.extend(raw)
        return len(data) - len(raw)

    def refer(at: int, target: int) -> None:
        struct.pack_into("<I", data, at, target - at)

    def table(vtable: bytes, body: bytes) -> int:
        vtable_at = add(vtable)
        at = add(body)
        struct.pack_into("<i", data, at, at - vtable_at)
        return at

    chain_refs = add(struct.pack("<I", chains) + bytes(4 * chains))
    refer(chains_field, chain_refs)
    chain = table(struct.pack("<HHHHHxx", 10, 8, 0, 0, 4), bytes(8))  # instructions only
    instruction_refs = add(struct.pack("<I", instructions) + bytes(4 * instructions))
    refer(chain + 4, instruction_refs)
    instruction = table(struct.pack("<HHHH", 8, 12, 4, 8), struct.pack("<iBxxxI", 0, 1, 0))
    call = table(struct.pack("<HHHH", 8, 12, 4, 8), bytes(12))  # KernelCall: op 0, args
    refer(instruction + 8, call)
    refer(call + 8, add(struct.pack("<I", 0)))  # no arguments
    for k in range(chains):
        refer(chain_refs + 4 + 4 * k, chain)
    for k in range(instructions):
        refer(instruction_refs + 4 + 4 * k, instruction)
    return bytes(data)


def test_shared_references_are_refused_within_a_bound_of_the_file_size(tmp_path, capsys):
    """Vectors pointing many times at one table: refused once the work passes
    `WORK_PER_BYTE` units per byte, in memory a small multiple of the file's size."""
    import torch
    from executorch.exir import to_edge

    class Residual(torch.nn.Module):  # no constants: no segments, no extended header
        def forward(self, x):
            return torch.relu(x) + x

    base = to_edge(torch.export.export(Residual(), (torch.randn(4, 8),))).to_executorch().buffer
    assert base[8:12] != b"eh00" and verify(base, "residual.pte").work <= len(base)
    bomb = shared_chain_program(base, 4000, 4000)  # 16 million instructions, 80 KB
    tracemalloc.start()
    try:
        with pytest.raises(ProblemError, match=f"bomb.pte: not a valid ExecuTorch program: "
                                               f"Program.execution_plan.0..chains.*more than "
                                               f"{WORK_PER_BYTE} units of reading work per byte"):
            read_program(bomb, "bomb.pte")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * len(bomb) + (1 << 20)
    small = shared_chain_program(base, 2, 3)  # within the bound: read, one chain expected
    assert len(read_program(small, "small.pte").plans[0].chains) == 2
    path = tmp_path / "bomb.pte"
    path.write_bytes(bomb)
    one_line_refusal(capsys, "info", str(path))


def test_arguments_pointing_many_times_at_one_list_are_refused():
    """Rebuilding lifetimes expands every list argument: bounded like the reading."""
    values = [Tensor("FLOAT", 4, (4,), None, dim_order=(0,)), TensorList((0,) * 1000)]
    plan = ExecutionPlan("forward", values, (0,), (0,),
                         [[Instruction("KernelCall", 0, (1,) * 1000)]], [("aten::cat", "out")],
                         [], (0,), 0)
    _check_indices(plan, 2 * 10 ** 6, lambda k, n: True)  # 1000 x 1001 units
    with pytest.raises(ValueError, match="lists expanded, exceed"):
        _check_indices(plan, 10 ** 5, lambda k, n: True)


def test_exported_programs_need_a_fraction_of_the_work_bound(programs):
    for path in programs.values():
        data = path.read_bytes()
        layout = verify(data, str(path))
        assert 0 < layout.work <= layout.program_size < len(data)


RUNTIME = """
import json, sys
from memplan.executorch.executorch_pte import pte_layout
from memplan.executorch.executorch_runtime import run, seeded_inputs

def behaviour(path, inputs):
    try:
        return [b.hex() for call in run(open(path, "rb").read(), "forward", inputs)
                for b in call]
    except RuntimeError as error:
        return "refused: " + str(error).splitlines()[0]

for given, written in json.load(sys.stdin):
    layout = pte_layout(given)
    inputs = seeded_inputs(layout, 3 if layout.stateful else 1, 0)
    print(json.dumps([behaviour(given, inputs), behaviour(written, inputs)]))
"""


def runtime_behaviours(pairs: list[tuple[str, str]]) -> list[tuple[object, object]]:
    """Per (given, written) program pair, what ExecuTorch's runtime does with each on the
    same seeded inputs: every output's bytes, or the refusal. In a process of its own, so
    that a runtime abort fails the test instead of ending it."""
    run = subprocess.run([sys.executable, "-c", RUNTIME], input=json.dumps(pairs),
                         capture_output=True, text=True, cwd=Path(__file__).parent.parent)
    assert run.returncode == 0, run.stderr[-2000:]
    return [tuple(json.loads(line)) for line in run.stdout.splitlines()]


def mutated(data: bytes, rng: random.Random) -> bytes:
    """``data`` with one to four bytes of its flatbuffer (header included) changed."""
    size = struct.unpack_from("<Q", data, 16)[0] if data[8:12] == b"eh00" else len(data)
    out = bytearray(data)
    for _ in range(rng.choice((1, 1, 2, 4))):
        at = rng.randrange(size)
        out[at] = rng.randrange(256) if rng.random() < 0.5 else out[at] ^ 1 << rng.randrange(8)
    return bytes(out)


def test_seeded_byte_mutations_are_refused_in_one_line_or_rewritten_to_run_the_same(
        programs, tmp_path, capsys):
    """Each corruption: one line and exit 2, or exit 0 with a program that ExecuTorch's
    runtime treats exactly as the corrupted input (the same outputs bit for bit, or the
    same refusal when a kernel's own argument checks fail at run time); reading any of
    them in memory a small multiple of its size; the unmutated programs run, and so do
    most of those accepted."""
    rng = random.Random(5)
    pairs, refused = [], 0
    for name, path in programs.items():
        data = path.read_bytes()
        pairs.append((str(path), str(tmp_path / f"{name}.planned.pte")))
        for k in range(32):
            given = tmp_path / f"{name}_{k}.pte"
            given.write_bytes(mutated(data, rng))
            pairs.append((str(given), str(tmp_path / f"{name}_{k}.planned.pte")))
    accepted = []
    for given, written in pairs:
        code = main(["solve", given, "-o", written, "--planner", "greedy_by_size",
                     "--no-exact", "--quiet"])
        err = capsys.readouterr().err
        if code == OK:
            accepted.append((given, written))
            continue
        assert code == BAD_INPUT and err.count("\n") == 1 and Path(given).name in err, err
        assert all(c.isprintable() for c in err.rstrip("\n")) and len(err) < 1000, err
        refused += 1
    assert refused > len(pairs) // 2 and (str(programs["mlp"]), pairs[0][1]) in accepted
    for given, _ in pairs:  # reading, refused or not, in memory a few times the file's size
        data = Path(given).read_bytes()
        tracemalloc.start()
        try:
            read_program(data, f"{given} again")
        except ProblemError:
            pass
        finally:
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
        assert peak < 16 * len(data), given
    behaviours = runtime_behaviours(accepted)
    for (given, _), (before, after) in zip(accepted, behaviours, strict=True):
        assert before == after, given
        assert not isinstance(after, str) or "execute" in after, (given, after)
    runs = sum(not isinstance(after, str) for _, after in behaviours)
    assert runs >= len(accepted) * 2 // 3 and not isinstance(behaviours[0][1], str)
