"""ExecuTorch programs (``.pte``): read, re-planned, written back, proven in ExecuTorch's runtime.

The programs are exported here from small PyTorch models (`benchmarks.pte_models`),
once per module: an MLP, a conv net (a static view), a decoder whose KV cache
lives in mutable buffers (state carried from call to call).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path

import numpy as np
import pytest

from benchmarks.pte_models import export_pte
from memplan import api, validate
from memplan.cli import BAD_INPUT, FAILED, OK, main
from memplan.errors import InvalidPlanError, ProblemError
from memplan.executorch.executorch_chain import Access, _schema, _schema_texts, lifetimes
from memplan.executorch.executorch_pte import pte_layout, read_program, read_pte
from memplan.executorch.executorch_runtime import prove_program
from memplan.executorch.pte_flatbuffer import FILE_IDENTIFIER, SCHEMA_SHA256
from memplan.executorch.pte_program import planned_program, with_offsets
from memplan.formats.readers import load
from memplan.plan import Plan


@pytest.fixture(scope="module")
def programs(tmp_path_factory) -> dict[str, str]:
    """Each model's ``.pte`` file, exported by ExecuTorch (greedy planner)."""
    folder = tmp_path_factory.mktemp("pte")
    paths = {}
    for name in ("mlp", "conv_net", "decoder"):
        paths[name] = str(folder / f"{name}.pte")
        with open(paths[name], "wb") as handle:
            handle.write(export_pte(name))
    return paths


def test_the_pinned_schema_is_installed_and_another_refused(programs, tmp_path):
    """The reader's field slots are those of this program.fbs: an ExecuTorch whose schema
    changed fails here; a file of another schema is refused naming it."""
    folder = Path(find_spec("executorch").submodule_search_locations[0], "schema")
    for name, digest in SCHEMA_SHA256.items():
        assert hashlib.sha256((folder / name).read_bytes()).hexdigest() == digest, name
    assert f'file_identifier "{FILE_IDENTIFIER.decode()}"' in (folder / "program.fbs").read_text()
    other = tmp_path / "newer.pte"
    data = bytearray(Path(programs["mlp"]).read_bytes())
    data[4:8] = b"ET13"
    other.write_bytes(data)
    with pytest.raises(ProblemError, match=r"newer\.pte: an ExecuTorch program of schema "
                                           r"'ET13'; memplan reads ET12"):
        read_pte(other)


def test_reading_and_rewriting_import_neither_torch_nor_executorch(programs, tmp_path):
    planned = tmp_path / "planned.pte"
    driver = (f"import sys; from memplan.cli import main; "
              f"codes = main(['info', {programs['decoder']!r}]), "
              f"main(['solve', {programs['decoder']!r}, '-o', {str(planned)!r}, "
              f"'--time-limit', '2', '--quiet']); "
              f"print(codes, sorted(m for m in sys.modules if m.split('.')[0] in "
              f"('torch', 'executorch')))")
    run = subprocess.run([sys.executable, "-c", driver], capture_output=True, text=True,
                         check=True, cwd=Path(__file__).parent.parent)
    assert run.stdout.splitlines()[-1] == f"({OK}, {OK}) []"
    assert prove_program(programs["decoder"], Plan.from_offsets(
        read_pte(programs["decoder"]), pte_layout(planned).offsets, planner="written")).ok


def test_operator_schemas_read_from_the_yamls_are_torchs():
    """What the chain reads of every schema (each argument read, written, or both; a
    return new or aliasing) agrees with torch's registry, out variants torch generates
    (``autogen``) included."""
    import executorch.exir  # noqa: F401 (registers ExecuTorch's operators in torch)
    import torch

    def effect(mutable: bool, kwarg_only: bool) -> str:
        return "written" if mutable and kwarg_only else "both" if mutable else "read"

    texts, derived = _schema_texts()
    compared = 0
    for key in {*texts, *derived}:
        name, _, overload = key.partition(".")
        try:
            theirs = torch._C._get_schema(name, overload)
        except RuntimeError:
            continue  # not registered in this process
        ours = _schema(name, overload)
        if ours is None:
            assert key in derived and not overload.endswith("out"), key  # refused, not wrong
            continue
        positional = len(ours.arguments.flat_positional)
        assert [effect(a.annotation is not None and a.annotation.is_write, k >= positional)
                for k, a in enumerate(ours.arguments.flat_all)] == \
            [effect(a.alias_info is not None and a.alias_info.is_write, a.kwarg_only)
             for a in theirs.arguments], key
        assert [r.annotation is None for r in ours.returns] == \
            [r.alias_info is None for r in theirs.returns], key
        compared += 1
    assert compared > 2500


@pytest.mark.parametrize("name", ["mlp", "conv_net", "decoder"])
def test_the_programs_own_plan_is_valid_for_the_rebuilt_problem(programs, name):
    layout = pte_layout(programs[name])
    problem = layout.problem
    offsets = dict(zip(problem.ids, layout.offsets.tolist(), strict=True))
    assert validate(problem, offsets) == []
    assert int((layout.offsets + problem.sizes).max()) + layout.tail == layout.arena_size
    assert layout.method == "forward" and layout.mem_id == 1
    assert {b.kind for b in problem.buffers} >= {"input", "output"}
    ops = {step.op for step in problem.steps}
    assert "aten::addmm.out" in ops or "aten::convolution.out" in ops
    produced = {v for step in problem.steps for v in step.writes}
    viewed = {alias.dst for alias in problem.aliases}
    assert set(problem.ids) == produced | viewed  # every tensor is written or a view


def test_views_are_aliases_of_their_base_and_live_from_its_write(programs):
    problem = read_pte(programs["conv_net"])
    assert len(problem.aliases) >= 1
    for alias in problem.aliases:
        base = problem.buffer(problem.index(alias.src))
        view = problem.buffer(problem.index(alias.dst))
        assert alias.delta == 0 and view.size <= base.size
        assert view.start == base.start  # its bytes must hold from the base's write on
        assert not any(alias.dst in step.writes for step in problem.steps)


def test_mutable_buffers_are_state_live_the_whole_program(programs):
    layout = pte_layout(programs["decoder"])
    problem = layout.problem
    assert layout.stateful
    horizon = problem.horizon
    whole = [b for b in problem.buffers if (b.start, b.end) == (0, horizon) and b.kind != "input"]
    cache = 2 * 2 * 16 * 16 * 4  # two layers, k and v: 1 x heads 2 x context 16 x 16 x float32
    assert sum(b.size for b in whole) >= cache
    # a cache is read (attention) before the call writes it (index_copy_): state
    first = {b.id: min([t for t, s in enumerate(problem.steps) if b.id in s.reads] or [horizon])
             for b in whole}
    assert any(first[b.id] < min([t for t, s in enumerate(problem.steps) if b.id in s.writes]
                                 or [horizon]) for b in whole)


def test_read_refuses_what_cannot_be_rebuilt(tmp_path, programs):
    bad = tmp_path / "bad.pte"
    bad.write_bytes(b"not a program at all")
    with pytest.raises(ProblemError, match="bad.pte: not an ExecuTorch program"):
        read_pte(bad)
    with pytest.raises(ProblemError, match="no execution plan 'other'; the program has 'forward'"):
        read_pte(programs["mlp"], method="other")
    with pytest.raises(ProblemError, match="plans no tensor in memory id 3"):
        read_pte(programs["mlp"], mem_id=3)


def test_control_flow_is_refused_naming_the_instruction():
    import torch
    from executorch.exir import to_edge

    class Branch(torch.nn.Module):
        def forward(self, x):
            return torch.cond(x.sum() > 0, lambda x: x * 2, lambda x: x - 1, (x,))

    with torch.no_grad():
        branch = to_edge(torch.export.export(Branch(), (torch.randn(4),))).to_executorch()
    with pytest.raises(ProblemError, match=r"instruction \d+ \(JumpFalseCall\): control flow"):
        read_pte(branch.buffer)


@pytest.mark.parametrize("call, why", [
    ("MoveCall(move_from=4, move_to=5)", "control flow"),
    ("FreeCall(value_index=4)", "it frees a tensor")])
def test_other_instructions_are_refused_naming_them(programs, call, why):
    from executorch.exir import schema
    from executorch.exir._serialize import _deserialize_pte_binary, _serialize_pte_binary

    pte = _deserialize_pte_binary(Path(programs["mlp"]).read_bytes())
    chain = pte.program.execution_plan[0].chains[0]
    chain.instructions.insert(1, schema.Instruction(eval(call, vars(schema))))
    data = bytes(_serialize_pte_binary(pte, extract_delegate_segments=True))
    with pytest.raises(ProblemError, match=rf"instruction 1 \({call.split('(')[0]}\): {why}"):
        read_pte(data)


def test_a_dynamic_shape_program_runtime_views_are_aliases_and_it_is_proven():
    import torch
    from executorch.exir import to_edge

    class Dynamic(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(8, 8)

        def forward(self, x):
            y = self.linear(x).view(-1, 4)
            return y.relu(), torch.cat([y, y], 0)

    batch = torch.export.Dim("batch", max=16)
    with torch.no_grad():
        exported = torch.export.export(Dynamic(), (torch.randn(4, 8),),
                                       dynamic_shapes={"x": {0: batch}})
        data = to_edge(exported).to_executorch().buffer
    problem = read_pte(data)
    view = next(t for t, step in enumerate(problem.steps) if "et_view" in step.op)
    (read,) = problem.steps[view].reads[:1]
    assert any(alias.src == read for alias in problem.aliases)  # the view aliases its base
    plan = api.solve(problem, time_limit=2)
    assert prove_program(data, plan).ok


def test_an_arena_shared_by_methods_is_refused_each_methods_own_is_read():
    import torch
    from executorch.exir import ExecutorchBackendConfig, to_edge
    from executorch.exir.passes import MemoryPlanningPass

    class Add(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("state", torch.zeros(4))

        def forward(self, x):
            self.state.add_(x)
            return self.state * 2

    class Get(Add):
        def forward(self, x):
            return self.state + x

    with torch.no_grad():
        methods = {"add": torch.export.export(Add(), (torch.randn(4),)),
                   "get": torch.export.export(Get(), (torch.randn(4),))}
        shared = MemoryPlanningPass(share_mutable_buffers=True)
        program = to_edge(methods).to_executorch(ExecutorchBackendConfig(
            memory_planning_pass=shared, emit_mutable_buffer_names=True)).buffer
    with pytest.raises(ProblemError, match="2 execution plans \\('add', 'get'\\), 2 with a "
                                           "memory plan: name one"):
        read_pte(program)
    with pytest.raises(ProblemError, match="memory id 2 of execution plan 'add' is shared "
                                           "with 'get'"):
        read_pte(program, method="add", mem_id=2)
    assert len(read_pte(program, method="get", mem_id=1)) >= 1


def test_constant_methods_have_no_plan_forward_is_read(tmp_path):
    """ExecuTorch's LLM export adds constant methods (no tensors planned): ``forward``,
    or the one method with a plan, is read when none is named."""
    import torch
    from executorch.exir import to_edge

    mlp = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
    with torch.no_grad():
        program = to_edge(torch.export.export(mlp.eval(), (torch.randn(8, 16),)),
                          constant_methods={"get_max_seq_len": 128, "use_kv_cache": True}
                          ).to_executorch().buffer
    layout = pte_layout(program)
    assert layout.method == "forward" and len(layout.problem) >= 3
    path = tmp_path / "constant_methods.pte"
    path.write_bytes(program)
    assert api.from_executorch(path).ids == layout.problem.ids  # as the docs say
    with pytest.raises(ProblemError, match="plans no tensor"):
        read_pte(program, method="get_max_seq_len")
    planned = tmp_path / "planned.pte"
    assert main(["solve", str(path), "--method", "forward", "-o", str(planned),
                 "--time-limit", "2", "--quiet"]) == OK
    assert main(["prove", str(path), str(planned), "--method", "forward"]) == OK
    assert main(["info", str(path), "--method", "use_kv_cache"]) == BAD_INPUT
    assert main(["info", str(path)]) == OK


def test_an_xnnpack_delegated_program_is_replanned_and_proven():
    """Every argument of a delegate call is live across it: the program's own plan is
    valid for the rebuilt problem, and memplan's runs bit-identical in the runtime."""
    from benchmarks import executorch_zoo as zoo
    from benchmarks.executorch_models import export

    model = zoo.llama(64, 2, 16, vocab=64)
    program = export(model, xnnpack=True).to_executorch().buffer
    layout = pte_layout(program)
    delegates = [step for step in layout.problem.steps if step.op.startswith("delegate")]
    assert delegates and all(step.op == "delegate XnnpackBackend" for step in delegates)
    plan = api.solve(layout.problem, time_limit=2)
    assert validate(layout.problem, plan) == [] and plan.arena_size <= layout.arena_size
    assert prove_program(program, plan).ok


def test_a_value_assembled_from_parts_is_refused():
    """Value 3 is read at step 3, but values 1 and 2 wrote its two halves: no single base."""
    found = Access(reads={3: [3]}, writes={1: [1], 2: [2]}, final=3)
    span = {1: (0, 64), 2: (64, 128), 3: (0, 128)}
    with pytest.raises(ProblemError, match="value 3 is read at instruction 2, but its bytes were "
                                           "last written by value 2, which covers only part"):
        lifetimes(found, span, set(), set())
    whole = lifetimes(found, {1: (0, 128), 2: (128, 192), 3: (0, 64)}, set(), set())
    assert (whole[3].base, whole[3].start, whole[3].end) == (1, 1, 4)  # a view of value 1


def program_differences(a: bytes, b: bytes) -> list[str]:
    """The paths of the fields where two programs, as ExecuTorch's own reader reads them,
    differ (``execution_plan[0].values[5].val.allocation_info.memory_offset_low``)."""
    from executorch.exir._serialize import _deserialize_pte_binary

    found: list[str] = []

    def walk(x, y, path: str) -> None:
        if type(x) is not type(y):
            found.append(path)
        elif dataclasses.is_dataclass(x):
            for f in dataclasses.fields(x):
                walk(getattr(x, f.name), getattr(y, f.name), f"{path}.{f.name}")
        elif isinstance(x, list | tuple | dict):
            keys = range(len(x)) if isinstance(x, list | tuple) else x.keys()
            if len(x) != len(y) or (isinstance(x, dict) and x.keys() != y.keys()):
                found.append(path)
                return
            for key in keys:
                walk(x[key], y[key], f"{path}[{key!r}]")
        elif x != y:
            found.append(path)

    walk(_deserialize_pte_binary(a), _deserialize_pte_binary(b), "pte")
    return found


@pytest.mark.parametrize("name", ["mlp", "conv_net", "decoder"])
def test_the_planned_program_differs_only_in_offsets_and_arena_size(programs, name):
    """ExecuTorch's own reader sees every field of the re-planned program as it was, but
    the offsets and the arena size (the bytes differ only where references moved)."""
    problem = read_pte(programs[name])
    plan = api.solve(problem, time_limit=5)
    planned = planned_program(programs[name], problem, plan)
    changed = program_differences(Path(programs[name]).read_bytes(), planned)
    assert changed, "the plan moves some tensor"
    for path in changed:
        assert path.endswith((".allocation_info.memory_offset_low",
                              ".allocation_info.memory_offset_high",
                              ".non_const_buffer_sizes[1]")), path
    again = pte_layout(planned)
    original = pte_layout(programs[name])
    assert again.problem.ids == problem.ids
    assert np.array_equal(again.problem.starts, problem.starts)
    assert np.array_equal(again.problem.ends, problem.ends)
    assert np.array_equal(again.offsets, plan.offsets)
    assert again.arena_size == plan.arena_size + original.tail <= original.arena_size


def test_zero_byte_tensors_are_no_buffers_and_written_at_offset_0():
    import torch
    from executorch.exir import to_edge

    class Empty(torch.nn.Module):
        def forward(self, x):
            empty = x[:, 2:2] * 3
            return torch.cat([x * 2, empty], 1) + 1, empty

    with torch.no_grad():
        data = to_edge(torch.export.export(Empty(), (torch.randn(4, 8),))).to_executorch().buffer
    layout = pte_layout(data)
    assert layout.empty and not {f"v{v}" for v in layout.empty} & set(layout.problem.ids)
    plan = api.solve(layout.problem, time_limit=2)
    planned = planned_program(data, layout.problem, plan)
    values = read_program(planned).plans[0].values
    assert all(values[v].allocation.offset == 0 for v in layout.empty)
    assert prove_program(data, plan).ok


def test_the_writer_refuses_an_invalid_plan_or_another_programs(programs):
    problem = read_pte(programs["mlp"])
    overlapping = Plan.from_offsets(problem, np.zeros(len(problem)), planner="zeros")
    with pytest.raises(InvalidPlanError):
        planned_program(programs["mlp"], problem, overlapping)
    other = read_pte(programs["conv_net"])
    with pytest.raises(ProblemError, match="another program"):
        planned_program(programs["mlp"], other, api.solve(other, time_limit=1))


@pytest.mark.parametrize("name", ["mlp", "conv_net", "decoder"])
def test_the_replanned_program_runs_bit_identical_in_executorch(programs, name):
    """The program ``solve -o`` writes (checked, read back) is the one that runs."""
    problem = read_pte(programs[name])
    plan = api.solve(problem, time_limit=5)
    proof = prove_program(programs[name], plan,
                          program=planned_program(programs[name], problem, plan))
    assert proof.ok, proof.lines()
    assert proof.calls == (3 if name == "decoder" else 1)
    assert proof.planned_bytes <= proof.original_bytes
    assert "PROVEN" in proof.lines()[0]


@pytest.mark.parametrize("name", ["mlp", "decoder"])
def test_an_overlapping_plan_is_caught_by_the_validator_and_by_the_runtime(programs, name):
    problem = read_pte(programs[name])
    overlapping = Plan.from_offsets(problem, np.zeros(len(problem)), planner="zeros")
    written = with_offsets(pte_layout(programs[name]), overlapping.offsets,
                           overlapping.arena_size)
    with pytest.raises(ProblemError, match="on shared bytes|assembled in place"):
        read_pte(written)  # the overlapping program, read back, is refused
    proof = prove_program(programs[name], overlapping)
    assert not proof.ok and proof.violations, "the validator sees the overlap"
    assert proof.mismatches, "the runtime's outputs differ (or it refuses the program)"
    assert "MISMATCH" in proof.lines()[0]


def test_cli_info_solve_prove_on_a_pte(capsys, programs, tmp_path):
    path = programs["decoder"]
    assert main(["info", path]) == OK
    assert "lower bound" in capsys.readouterr().out
    planned, plan_json = str(tmp_path / "planned.pte"), str(tmp_path / "plan.json")
    assert main(["solve", path, "--time-limit", "5", "-o", planned, "--prove"]) == OK
    out = capsys.readouterr().out
    assert "wrote output (pte)" in out and "PROVEN" in out and "3 calls" in out
    assert "program's own plan  " in out and f"({pte_layout(path).arena_size} B)" in out
    assert read_pte(planned).ids == read_pte(path).ids
    assert main(["solve", path, "--time-limit", "5", "-o", plan_json, "--quiet"]) == OK
    assert main(["prove", path, plan_json, "--json"]) == OK
    verdict = json.loads(capsys.readouterr().out)
    assert verdict["proven"] and verdict["planned_bytes"] <= verdict["original_bytes"]
    with open(plan_json) as handle:
        document = json.load(handle)
    document["plan"]["offsets"] = {k: 0 for k in document["plan"]["offsets"]}
    with open(plan_json, "w") as handle:
        json.dump(document, handle)
    assert main(["prove", path, plan_json]) == FAILED
    assert "MISMATCH" in capsys.readouterr().out


def test_cli_bad_pte_is_one_line_exit_2(capsys, tmp_path, programs):
    bad = tmp_path / "broken.pte"
    bad.write_bytes(open(programs["mlp"], "rb").read()[:200])
    assert main(["info", str(bad)]) == BAD_INPUT
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "broken.pte: not a valid ExecuTorch program: its " \
        "extended header's program_size" in err
    assert main(["info", str(tmp_path / "missing.pte")]) == BAD_INPUT
    assert "missing.pte: cannot read" in capsys.readouterr().err
    assert load(programs["mlp"]).ids == read_pte(programs["mlp"]).ids  # by extension


def test_solve_replans_every_method_with_a_plan_into_one_program(tmp_path, capsys):
    """Two planned methods and a constant one: one ``solve`` re-plans both into one
    program, each proven in the runtime; ``--method`` re-plans one, the other kept."""
    import torch
    from executorch.exir import to_edge

    from benchmarks.pte_models import MODELS

    torch.manual_seed(0)
    with torch.no_grad():
        exported = {name: torch.export.export(model.eval(), inputs) for name, (model, inputs)
                    in (("forward", MODELS["mlp"]()), ("features", MODELS["conv_net"]()))}
        data = to_edge(exported, constant_methods={"get_max_seq_len": 128}
                       ).to_executorch().buffer
    path, planned = tmp_path / "two.pte", tmp_path / "planned.pte"
    path.write_bytes(data)
    assert main(["solve", str(path), "-o", str(planned), "--time-limit", "4", "--prove",
                 "--json"]) == OK
    document = json.loads(capsys.readouterr().out)
    assert set(document["methods"]) == set(document["proofs"]) == {"forward", "features"}
    for method, summary in document["methods"].items():
        original, written = pte_layout(path, method=method), pte_layout(planned, method=method)
        assert document["proofs"][method]["proven"]
        assert written.problem.ids == original.problem.ids
        assert written.arena_size == summary["plan"]["arena_size"] + original.tail
        assert summary["program_plan"] == original.arena_size
    assert main(["solve", str(path), "-o", str(planned), "--time-limit", "2"]) == OK
    out = capsys.readouterr().out
    assert out.count("method forward ") == out.count("method features ") == 1
    one = tmp_path / "one.pte"
    assert main(["solve", str(path), "--method", "forward", "-o", str(one), "--quiet",
                 "--time-limit", "2"]) == OK
    kept = pte_layout(one, method="features")
    assert np.array_equal(kept.offsets, pte_layout(path, method="features").offsets)
    assert main(["solve", str(path), "-o", str(tmp_path / "plan.json")]) == BAD_INPUT
    assert "other outputs take one method (--method NAME)" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["mlp", "decoder"])
def test_rewritten_with_its_own_offsets_no_field_changes_and_segments_keep_alignment(
        programs, name):
    """Every planned tensor gets a new allocation table: the program grows past the padding
    before its segments, which move back by a multiple of their base's alignment."""
    original = Path(programs[name]).read_bytes()
    layout = pte_layout(original)
    rewritten = with_offsets(layout, layout.offsets, layout.arena_size)
    before, after = read_program(original), read_program(rewritten)
    assert after.program_size > before.segment_base > 0  # the segments had to move
    step = before.segment_base & -before.segment_base
    assert after.segment_base % step == 0
    assert rewritten[after.segment_base:] == original[before.segment_base:]
    assert program_differences(original, rewritten) == []
