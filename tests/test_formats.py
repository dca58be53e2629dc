"""MiniMalloc CSV and memplan JSON: round trips keep every field; bad files are named."""

import json

import numpy as np
import pytest

from memplan import Alias, Buffer, Plan, Problem, ProblemError, Region
from memplan.formats import memplan_json, minimalloc_csv
from memplan.formats.readers import load


def rich_problem():
    return Problem(
        [Buffer("in", 64, 0, 2, alignment=16, offset=0, kind="input"),
         Buffer("mid", 32, 1, 3, alignment=16, regions=("sram", "dram")),
         Buffer("view", 32, 2, 4, regions=("sram",)),
         Buffer("tmp", 8, 2, 3, kind="scratch", max_size=64),
         Buffer("out", 16, 3, 5, kind="output")],
        aliases=[Alias("mid", "view", 0), Alias("mid", "out", 16, optional=True)],
        conflicts=[("in", "out")], capacity=4096, widths=[64, 96, 72, 48, 16],
        regions=[Region("sram", 1024, 0.0), Region("dram", None, 1.5)], name="rich")


def test_json_problem_round_trip_keeps_every_field(tmp_path):
    problem = rich_problem()
    path = tmp_path / "p.json"
    memplan_json.write_problem(path, problem)
    back = load(path)
    assert list(back.buffers) == list(problem.buffers)
    assert back.aliases == problem.aliases and back.regions == problem.regions
    assert back.conflicts.tolist() == problem.conflicts.tolist()
    assert back.capacity == 4096 and back.widths.tolist() == problem.widths.tolist()
    assert back.name == "rich"


def test_json_plan_round_trip(tmp_path):
    problem = rich_problem()
    plan = Plan.from_offsets(problem, [0, 64, 64, 96, 128], planner="hand", best_bound=100,
                             stats={"nodes": np.int64(3)}, regions=[0, 0, 0, 1, 1],
                             sizes=[64, 32, 32, 16, 16])
    path = tmp_path / "plan.json"
    memplan_json.write_plan(path, problem, plan)
    back = memplan_json.read_plan(path, problem)
    assert back.offsets.tolist() == plan.offsets.tolist()
    assert back.regions.tolist() == [0, 0, 0, 1, 1] and back.sizes.tolist() == plan.sizes.tolist()
    for key in ("arena_size", "lower_bound", "status", "best_bound", "planner", "seconds"):
        assert getattr(back, key) == getattr(plan, key)
    assert back.stats == {"nodes": 3}


def test_csv_round_trip_with_alignment_and_solution(tmp_path):
    problem = Problem([Buffer("a", 8, 0, 3, alignment=8), Buffer("b", 4, 3, 9)], capacity=16)
    plan = Plan.from_offsets(problem, [0, 0], planner="hand")
    path = tmp_path / "p.16.csv"
    minimalloc_csv.write_csv(path, problem, plan)
    assert path.read_text().splitlines() == ["id,lower,upper,size,alignment,offset",
                                             "a,0,3,8,8,0", "b,3,9,4,1,0"]
    back, offsets = minimalloc_csv.read_solution(path)
    assert list(back.buffers) == list(problem.buffers) and back.capacity == 16
    assert offsets == {"a": 0, "b": 0}


def test_csv_header_aliases_and_inclusive_end(tmp_path):
    path = tmp_path / "x.csv"
    path.write_text("buffer,begin,end,size\nx,0,2,4\n")
    problem = minimalloc_csv.read_problem(path)
    assert (problem.starts[0], problem.ends[0]) == (0, 3) and problem.capacity is None


def test_csv_refuses_what_it_cannot_hold(tmp_path):
    with pytest.raises(ProblemError, match="cannot hold pinned offsets, explicit conflicts"):
        minimalloc_csv.write_csv(tmp_path / "x.csv", rich_problem())


def test_csv_cells_read_as_they_are_checked(tmp_path):
    """A cell the check strips (Python's whitespace, \\x1c-\\x1f among it) is read stripped:
    int() alone would refuse it with a ValueError."""
    path = tmp_path / "sep.csv"
    path.write_text("id,lower,upper,size\na,0,1,4\nb,0,1,12\x1f\n")
    assert minimalloc_csv.read_problem(path).sizes.tolist() == [4, 12]


@pytest.mark.parametrize("text, words", [
    ("", "empty file"),
    ("id,lower,upper\n", "missing column for 'size'"),
    ("id,lower,upper,size,colour\n", "unknown column 'colour'"),
    ("id,lower,upper,size\na,0,1\n", ":2: malformed row: 3 fields"),
    ("id,lower,upper,size\na,0,1,big\n", ":2: size must be an integer in ASCII digits, got 'big'"),
    ("id,lower,upper,size\na,0,1,1_000\n", ":2: size must be an integer"),
    ("id,lower,upper,size\na,0,1,\u0661\u0662\n", ":2: size must be an integer"),
    ("id,lower,upper,size\na,0,1,4.0\n", ":2: size must be an integer"),
    ("id,lower,upper,size\na,0,1,4\nb,0,1,-4\n", ":3: buffer 'b': size must be positive"),
    ("id,lower,upper,size\na,0,1,4\nb,5,5,4\n", ":3: buffer 'b': empty lifetime"),
    ("id,lower,upper,size\na,0,1,4\na,0,1,4\n", "buffer 'a': duplicate id"),
    ('id,lower,upper,size\na,0,1,4\n\nb,0,1,"1,2"\n', ":4: size must be an integer in ASCII "
                                                      "digits, got '1,2'"),
    ("id,lower,upper,size\na,0,1,4\nb,0,1,99999999999999999999\n", "buffer 'b': size"),
    ("id,lower,upper,size\na,0,1,4\nb,0,9007199254740993,4\n", "buffer 'b': end"),
])
def test_bad_csv_names_file_and_line(tmp_path, text, words):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(ProblemError, match=words) as error:
        minimalloc_csv.read_problem(path)
    assert "bad.csv" in str(error.value)


@pytest.mark.parametrize("document, words", [
    ({"buffers": [{"id": "a", "size": 4, "start": 0}]}, "buffers\\[0\\]|buffer 'a': missing "
                                                         "field 'end'"),
    ({"buffers": [{"id": "a", "size": "4", "start": 0, "end": 1}]},
     "buffer 'a': field 'size' must be int"),
    ({"buffers": [{"id": "a", "size": 4, "start": 0, "end": 1}],
      "aliases": [{"src": "a", "dst": "q"}]}, "alias target names unknown buffer 'q'"),
    ({"buffers": [], "conflicts": [["a"]]}, "conflicts\\[0\\]: expected a pair"),
    ({"format": "memplan-plan"}, "not a memplan problem"),
])
def test_bad_json_names_the_entry(tmp_path, document, words):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(document))
    with pytest.raises(ProblemError, match=words):
        load(path)


def test_unreadable_files(tmp_path):
    with pytest.raises(ProblemError, match="not valid JSON"):
        (tmp_path / "t.json").write_text("{oops")
        load(tmp_path / "t.json")
    with pytest.raises(ProblemError, match="cannot read"):
        load(tmp_path / "absent.csv")
    with pytest.raises(ProblemError, match="unknown file type '.txt'"):
        load(tmp_path / "model.txt")


def test_json_documents_are_written_a_line_per_buffer_and_offset(tmp_path):
    problem = rich_problem()
    plan = Plan.from_offsets(problem, [0, 64, 64, 96, 128], planner="hand",
                             stats={"nested": {"a": [1, 2]}, "ratio": 0.5, "name": 'q"uote'})
    document = {"problem": memplan_json.problem_to_dict(problem),
                "plan": memplan_json.plan_to_dict(problem, plan)}
    text = memplan_json.json_text(document)
    assert json.loads(text) == document
    lines = text.splitlines()
    for buffer in problem.ids:  # each buffer's entry and its offset on a line of their own
        assert sum(line.lstrip().startswith(f'{{"id": "{buffer}"') for line in lines) == 1
        assert sum(line.lstrip().startswith(f'"{buffer}": ') for line in lines) == 1
    path = tmp_path / "both.json"
    memplan_json.write_document(path, document)
    assert memplan_json.read_plan(path, memplan_json.read_problem(path)).offsets.tolist() == \
        [0, 64, 64, 96, 128]


def test_json_text_lays_out_any_document_and_reads_back_the_same():
    """One writer for memplan JSON and ``explain --json``: a short list whose items hold a
    long list (a peak and its tensors) is laid out a level deeper, the long list an item
    a line; a string that looks like the break between two objects stays whole."""
    many = memplan_json.LONG_LIST + 1
    tensors = [{"id": f"t{k}", "readers": [k, k + 1]} for k in range(many)]
    tensors[3]["id"] = '}, {"id": x'
    document = {"peaks": [{"step": 4, "tensors": tensors}], "empty": {}, "none": [],
                "pairs": (("a", "b"), ("c", "d")), "nested": {"a": {"b": [1.5, None]}},
                "flags": [True, False], "big": 2 ** 70}
    text = memplan_json.json_text(document)
    assert json.loads(text) == json.loads(json.dumps(document))
    lines = [line.strip() for line in text.splitlines()]
    assert sum(line.startswith('{"id": ') for line in lines) == many
    assert '"step": 4,' in lines and '"pairs": [' in lines
