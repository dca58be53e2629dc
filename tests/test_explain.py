"""`memplan.explain`: the peak's certificate, a plan's gap, why a capacity fails, what helps."""

from __future__ import annotations

import json

import numpy as np
import pytest

import memplan
from memplan import Alias, Buffer, Problem, Step, live_bytes, lower_bound, plan_with
from memplan.cli import FAILED, OK, main
from memplan.diagnosis.capacity_reason import subproblem
from memplan.diagnosis.explain import explain
from memplan.errors import ProblemError
from memplan.formats import memplan_json
from memplan.plan import Plan

from .conftest import light_models_dir

# Every step's live load is at most 6, yet no layout fits 6: the buffers FRAGMENTED force a
# hole (found by a random search; every one of them is needed, checked by brute force over
# all subsets when this instance was found). Columns: id, size, start, end.
FRAGMENTED = [("b0", 4, 0, 1), ("b1", 2, 0, 2), ("b3", 3, 1, 3), ("b2", 1, 1, 4),
              ("b5", 1, 2, 4), ("b6", 4, 3, 8), ("b11", 2, 7, 8)]
BYSTANDERS = [("b4", 1, 2, 3), ("b7", 1, 4, 5), ("b8", 1, 4, 6), ("b9", 1, 5, 7),
              ("b10", 1, 6, 7),  # in the window, but not needed
              ("late1", 3, 8, 11), ("late2", 2, 9, 12), ("late3", 1, 8, 10)]  # after it


def _problem(rows, capacity=None) -> Problem:
    return Problem([Buffer(id, size, start, end) for id, size, start, end in rows],
                   capacity=capacity)


def _infeasible_alone(problem: Problem, indices, capacity: int) -> bool:
    alone = subproblem(problem, indices, capacity)
    if lower_bound(alone) > capacity:
        return True
    plan = plan_with("exact", alone, time_limit=300, threads=1)  # milliseconds when idle
    return plan.status == "infeasible" and plan.best_bound > capacity


def test_a_step_whose_live_load_exceeds_the_capacity_is_named_with_its_buffers():
    rows = [("x", 40, 0, 2), ("y", 40, 1, 3), ("z", 30, 1, 2), ("w", 10, 2, 4),
            ("v", 50, 3, 5)]  # step 1: x + y + z = 110 > 100; every other step fits
    problem = _problem(rows, capacity=100)
    found = explain(problem).capacity
    assert found.kind == "live_load" and found.step == 1 and found.live_bytes == 110
    assert {t.id for t in found.tensors} == {"x", "y", "z"}
    assert found.proven and found.minimal
    assert _infeasible_alone(problem, [problem.index(t.id) for t in found.tensors], 100)
    smaller = explain(problem, capacity=75).capacity  # x + y = 80 > 75 already
    assert smaller.step == 1 and {t.id for t in smaller.tensors} == {"x", "y"}


def test_a_packing_that_fits_the_live_load_but_not_the_capacity_is_shrunk_to_its_core():
    problem = _problem(FRAGMENTED + BYSTANDERS, capacity=6)
    assert live_bytes(problem).max() == 6  # the live load fits
    found = explain(problem, time_limit=300).capacity  # milliseconds, but the machine is shared
    assert found.kind == "packing" and found.proven and found.minimal
    assert {t.id for t in found.tensors} == {row[0] for row in FRAGMENTED}
    assert found.window == (0, 8)
    indices = [problem.index(t.id) for t in found.tensors]
    assert _infeasible_alone(problem, indices, 6)
    for dropped in indices:  # minimal: without any one of them the rest fits
        rest = [i for i in indices if i != dropped]
        assert plan_with("exact", subproblem(problem, rest, 6), time_limit=300,
                         threads=1).arena_size <= 6
    assert explain(problem, capacity=7, time_limit=300).capacity.kind == "fits"


def test_a_pinned_buffer_above_the_capacity_is_the_reason():
    problem = Problem([Buffer("a", 8, 0, 2), Buffer("io", 4, 1, 3, offset=20)], capacity=16)
    found = explain(problem).capacity
    assert found.kind == "pinned" and [t.id for t in found.tensors] == ["io"]


@pytest.mark.parametrize("path", sorted(light_models_dir().glob("*.onnx")),
                         ids=lambda p: p.stem)
def test_every_light_model_names_a_peak_step_whose_live_bytes_are_the_bound(path):
    problem = memplan.load(path)
    found = explain(problem)
    bound = lower_bound(problem)
    live = live_bytes(problem)
    assert found.lower_bound == bound and found.peaks
    for peak in found.peaks:
        assert peak.live_bytes == bound == live[peak.step]
        assert peak.operator.op  # the ONNX op type of the node at that step
        live_ids = {problem.ids[i] for i in np.flatnonzero(
            (problem.starts <= peak.step) & (problem.ends > peak.step))}
        assert {t.id for t in peak.tensors} == live_ids
        assert [t.size for t in peak.tensors] == sorted((t.size for t in peak.tensors),
                                                        reverse=True)
        for t in peak.tensors:
            if t.kind != "input":
                assert t.producer is not None and t.producer.step == t.start
            assert all(t.start <= r.step < t.end for r in t.readers)
    assert set(found.peak_steps) == set(np.flatnonzero(live == bound).tolist())
    json.dumps(found.to_dict())


def test_the_gap_of_greedy_by_size_on_densenet_is_located():
    problem = memplan.load(light_models_dir() / "light_densenet121.onnx")
    plan = plan_with("greedy_by_size", problem)
    bound = lower_bound(problem)
    assert plan.arena_size > bound
    gap = explain(problem, plan).gap
    assert gap.arena_size == plan.arena_size and gap.lower_bound == bound
    ends = plan.offsets + problem.sizes
    above = {problem.ids[i] for i in np.flatnonzero(ends > bound)}
    assert {t.id for t in gap.tensors} == above
    assert gap.tensors[0].offset + gap.tensors[0].size == plan.arena_size
    first = min(int(problem.starts[problem.index(id)]) for id in above)
    assert gap.step == first  # before it no buffer reaches above the bound
    assert gap.live_at_step == live_bytes(problem)[gap.step] <= bound < gap.top_at_step
    assert sum(high - low for low, high in gap.holes) == gap.top_at_step - gap.live_at_step
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    ax = explain(problem, plan).plot_gap()
    low, high = ax.get_xlim()
    assert low <= gap.step < high and high - low < problem.horizon  # zoomed on the gap


def test_no_gap_for_a_plan_at_the_bound():
    problem = _problem([("a", 4, 0, 2), ("b", 4, 1, 3)])
    found = explain(problem, plan_with("greedy_by_size", problem))
    assert found.gap is None
    with pytest.raises(ValueError, match="no gap"):
        found.plot_gap()


def test_remedies_are_measured_on_the_bound():
    # x is read at steps 1 and 4: recomputing it for step 4 frees it over steps 2-3
    steps = [Step("in", "Conv", ("input",), ("x",)), Step("a", "Relu", ("x",), ("y",)),
             Step("b", "Relu", ("y",), ("z",)), Step("c", "Relu", ("z",), ("w",)),
             Step("d", "Add", ("x", "w"), ("out",))]
    problem = Problem([Buffer("input", 1, 0, 1, kind="input"), Buffer("x", 10, 0, 5),
                       Buffer("y", 8, 1, 3), Buffer("z", 8, 2, 4), Buffer("w", 1, 3, 5),
                       Buffer("out", 1, 4, 5, kind="output")], steps=steps)
    assert lower_bound(problem) == 26  # step 2: x + y + z
    found = {(r.change, r.tensor): r for r in explain(problem).remedies}
    # x lives [0, 2) and a copy [4, 5); the input lives on to recompute it: step 1 has
    # x + y + input = 19, step 2 y + z + input = 17
    assert (found["recompute", "x"].bound, found["recompute", "x"].saves) == (19, 7)
    # halves of 5 B, the input kept to step 4: step 2 has 5 + 8 + 8 + 1
    assert (found["split", "x"].bound, found["split", "x"].saves) == (22, 4)
    assert found["end_earlier", "x"].saves == 0  # x is still read at step 4 > the peak


def test_an_optional_alias_the_plan_did_not_take_is_measured():
    problem = Problem([Buffer("a", 10, 0, 2), Buffer("b", 10, 1, 3)],
                      aliases=[Alias("a", "b", optional=True)])
    apart = Plan.from_offsets(problem, [0, 10], planner="by hand")
    found = explain(problem, apart)
    assert found.alias_floor == 20
    [remedy] = found.alias_remedies
    assert remedy.tensor == "b" and remedy.bound == 10 and remedy.saves == 10
    shared = Plan.from_offsets(problem, [0, 0], planner="by hand")
    assert explain(problem, shared).alias_remedies == ()


def test_text_json_and_plot():
    problem = memplan.load(memplan.api.default_model()).replace(capacity=1_000_000)
    found = explain(problem, plan_with("best", problem))
    text = str(found)
    assert "'n2' (MaxPool)" in text and "r1" in text and "capacity" in text
    document = json.loads(json.dumps(found.to_dict()))
    assert document["capacity"]["kind"] == "live_load"
    assert document["peaks"][0]["operator"]["op"] == "MaxPool"
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    ax = found.plot()
    assert ax.get_title().startswith("squeezenet")


def test_problems_without_step_metadata_are_explained_too():
    problem = _problem(FRAGMENTED)
    found = explain(problem, plan_with("greedy_by_size", problem))
    assert found.peaks[0].operator.name == "" and found.peaks[0].tensors[0].producer is None
    assert {r.change for r in found.remedies} <= {"end_earlier"}
    assert "step" in str(found)


def test_steps_round_trip_through_json_and_bad_steps_are_refused(tmp_path):
    problem = memplan.load(memplan.api.default_model())
    assert problem.steps is not None and len(problem.steps) == problem.horizon
    path = tmp_path / "p.json"
    memplan_json.write_problem(path, problem)
    assert memplan_json.read_problem(path).steps == problem.steps
    plain = _problem(FRAGMENTED)
    assert "steps" not in memplan_json.problem_to_dict(plain)
    document = memplan_json.problem_to_dict(plain)
    document["steps"] = [{"name": "n", "op": "Conv", "reads": [3]}]
    with pytest.raises(ProblemError, match=r"steps\[0\].*reads"):
        memplan_json.problem_from_dict(document)


def test_cli_explain_solve_reason_and_info_default(capsys):
    assert main(["explain"]) == OK
    out = capsys.readouterr().out
    assert "peak" in out and "MaxPool" in out
    assert main(["explain", "--capacity", "1000000", "--json"]) == FAILED
    document = json.loads(capsys.readouterr().out)
    assert document["capacity"]["tensors"][0]["id"] == "r1"
    assert main(["solve", "--capacity", "1000000", "--no-exact"]) == FAILED
    out = capsys.readouterr().out
    assert "reason" in out and "'n2' (MaxPool)" in out and "memplan explain" in out
    assert main(["solve", "--capacity", "1000000", "--no-exact", "--json"]) == FAILED
    assert "MaxPool" in json.loads(capsys.readouterr().out)["reason"]
    assert main(["info"]) == OK
    assert "squeezenet" in capsys.readouterr().out


def test_tflite_steps_name_the_operators():
    pytest.importorskip("tflite_micro.tensorflow.lite.micro.python.schema_py_generated",
                        reason="the tflite extra is not installed")
    from memplan.tflite.tflite import from_tflite

    from .test_tflite import ADD, FLOAT32, RELU, build

    data = build([("x", [1, 64], FLOAT32), ("y", [1, 64], FLOAT32), ("z", [1, 64], FLOAT32)],
                 [(RELU, [0], [1]), (ADD, [1, 0], [2])], [0], [2])
    problem = from_tflite(data)
    assert [(s.op, s.reads, s.writes) for s in problem.steps] == [
        ("", (), ()), ("RELU", ("x",), ("y",)), ("ADD", ("y", "x"), ("z",))]
    peak = explain(problem).peaks[0]
    assert peak.operator.op in ("RELU", "ADD")
    assert {t.id for t in peak.tensors} >= {"x", "y"}
    assert all(t.producer is None or t.producer.step == t.start for t in peak.tensors)


def test_a_capacity_is_explained_on_a_problem_with_regions_too():
    problem = Problem([Buffer(id, size, start, end, regions=("sram",))
                       for id, size, start, end in FRAGMENTED],
                      regions=[memplan.Region("sram", 6), memplan.Region("dram")], capacity=6)
    found = explain(problem, time_limit=300).capacity
    assert found.kind == "packing" and {t.id for t in found.tensors} == {r[0] for r in FRAGMENTED}


def test_explain_with_regions_names_the_fast_peak_and_the_curve(capsys, tmp_path):
    """``--regions``: the fast region's fullest step and its tensors, then a larger region's
    savings per KiB (reads from the steps weight the bytes)."""
    steps = [Step("mm", "MatMul", (), ("a",)), Step("add", "Add", ("a",), ("b",)),
             Step("out", "Add", ("a", "b"), ("c",))]
    problem = Problem([Buffer("a", 4096, 0, 3), Buffer("b", 4096, 1, 3),
                       Buffer("c", 2048, 2, 3)], steps=steps)
    path = tmp_path / "three.json"
    path.write_text(json.dumps(memplan_json.problem_to_dict(problem)))
    assert main(["explain", str(path), "--regions", "fast=6KiB,slow", "--time-limit", "2",
                 "--json"]) == OK
    found = json.loads(capsys.readouterr().out)
    assert found["fast"] == "fast" and found["capacity"] == 6144
    assert found["tensors"][0] == ["a", 4096, 2]  # read by add and out: kept fast
    here, *larger = found["curve"]
    assert here["slow_bytes"] == 4096 and larger[-1]["slow_bytes"] == 0
    assert main(["explain", str(path), "--regions", "fast=6KiB"]) == 2  # one region: usage
    assert "two regions or more" in capsys.readouterr().err


# A weight transposed and converted at every run (t, then c), a slice of a constant by a size
# computed at run time (s: not foldable), then the product with the input:
#   step 0 inputs -> x; 1 t = permute(w); 2 c = convert(t); 3 s = slice(freqs, n);
#   4 y = mm(x, c, s); 5 z = relu(y)
CONSTANT_CHAIN = [("x", 100, 0, 5, "input"), ("t", 1000, 1, 3, "activation"),
                  ("c", 1000, 2, 5, "activation"), ("s", 50, 3, 5, "activation"),
                  ("y", 200, 4, 6, "activation"), ("z", 200, 5, 6, "output")]
CHAIN_STEPS = [Step("inputs", "", (), ("x",)), Step("p", "permute", (), ("t",), ("w",)),
               Step("cv", "convert", ("t",), ("c",)),
               Step("sl", "slice", ("n",), ("s",), ("freqs",)),
               Step("mm", "mm", ("x", "c", "s"), ("y",)), Step("r", "relu", ("y",), ("z",))]


def test_a_tensor_computed_from_constants_alone_is_named_with_what_folding_it_saves(tmp_path):
    problem = Problem([Buffer(id, size, start, end, kind=kind)
                       for id, size, start, end, kind in CONSTANT_CHAIN], steps=CHAIN_STEPS)
    found = explain(problem)
    without = lower_bound(subproblem(problem, [0, 3, 4, 5], None))  # x, s, y, z
    assert found.lower_bound == 2100 and without == 400
    (folding,) = found.folding
    assert (folding.tensor, folding.size, folding.constants, folding.kept) == ("c", 1000,
                                                                               ("w",), ())
    assert [o.op for o in folding.operators] == ["permute", "convert"]
    assert sorted(folding.buffers) == ["c", "t"]
    assert (folding.bound, folding.saves) == (without, 2100 - without)
    assert found.folded_bound == without
    assert "c = permute step 1, then convert step 2 of w: bound 400 B" in str(found)
    assert json.loads(json.dumps(found.to_dict()))["folding"][0]["tensor"] == "c"
    path = tmp_path / "p.json"
    memplan_json.write_problem(path, problem)
    assert memplan_json.read_problem(path).steps == problem.steps


def test_nothing_is_folded_without_constants_or_when_a_run_time_value_is_read():
    rows = [Buffer(id, size, start, end, kind=kind) for id, size, start, end, kind
            in CONSTANT_CHAIN]
    plain = [Step(s.name, s.op, s.reads, s.writes) for s in CHAIN_STEPS]
    assert explain(Problem(rows, steps=plain)).folding == ()
    found = explain(Problem(rows, steps=CHAIN_STEPS[:4] + [
        Step("mm", "mm", ("x", "c", "s"), ("y", "c")), CHAIN_STEPS[5]]))
    (folding,) = found.folding  # c is written again at run time: t is what to fold
    assert (folding.tensor, folding.buffers) == ("t", ("t",))


def test_a_static_view_of_a_transformed_constant_is_folded_with_its_base():
    rows = [Buffer("x", 100, 0, 3, kind="input"), Buffer("t", 1000, 1, 3),
            Buffer("v", 1000, 1, 3), Buffer("y", 200, 2, 4, kind="output")]
    steps = [Step("inputs", "", (), ("x",)), Step("p", "permute", (), ("t",), ("w",)),
             Step("mm", "mm", ("x", "v"), ("y",))]  # v: t's bytes seen as another shape
    problem = Problem(rows, aliases=[Alias("t", "v")], steps=steps)
    (folding,) = explain(problem).folding
    assert (folding.tensor, folding.buffers, folding.bound) == ("v", ("t", "v"), 300)


def test_the_json_lists_every_tensor_one_a_line_and_reads_back_as_the_dataclasses():
    """`json_text`: a long list (the tensors live at a peak) one compact item a line; the
    document reads back equal to `dataclasses.asdict`'s, whichever encoder wrote it."""
    from dataclasses import asdict

    from memplan.formats.memplan_json import LONG_LIST, json_text

    many = LONG_LIST + 5
    problem = Problem([Buffer(f"t{i}", 8 + i, 0, 2) for i in range(many)] +
                      [Buffer('odd "id" \\ here', 1, 1, 3)])
    found = explain(problem, plan_with("greedy_by_size", problem), time_limit=None)
    text = json_text(found.to_dict())
    expected = asdict(found)
    expected.pop("_plot")
    assert json.loads(text) == json.loads(json.dumps(expected))
    lines = text.splitlines()
    assert sum(line.lstrip().startswith('{"id": "t') for line in lines) == many  # a tensor a line
    assert len(found.peaks[0].tensors) == many + 1


def test_a_remedy_starts_only_when_its_estimated_rebuild_fits_the_deadline(monkeypatch):
    """The first remedy too is priced before it runs (`CHANGE_CPU_PER_BUFFER` a buffer):
    when that would pass the deadline, none runs and the cut is named."""
    import time

    from memplan.diagnosis import what_if

    problem = Problem([Buffer("a", 8, 0, 3), Buffer("b", 4, 1, 2)])
    deadline = time.perf_counter() + 30.0
    cut: list[str] = []
    assert what_if.remedies(problem, ["a"], deadline=deadline, cut=cut) and not cut
    monkeypatch.setattr(what_if, "CHANGE_CPU_PER_BUFFER", 60.0)  # 120 s for two buffers
    assert what_if.remedies(problem, ["a"], deadline=deadline, cut=cut) == []
    assert cut == ["remedies"]
