"""Outputs are checked before any work and written whole or not at all; plan files whose
claims contradict themselves are refused, naming the file and the field."""

from __future__ import annotations

import json
import os
import stat

import numpy as np
import pytest

from memplan import Buffer, Problem, plan_with
from memplan.cli import BAD_INPUT, FAILED, main
from memplan.errors import ProblemError
from memplan.formats import memplan_json
from memplan.formats.writers import export
from memplan.onnx.prove import model_options
from memplan.output_files import check_output, open_replacing, replacing

KEEP = "KEEP ME\n"


@pytest.fixture
def small(tmp_path) -> str:
    path = tmp_path / "p.csv"
    path.write_text("id,lower,upper,size\na,0,2,64\nb,1,3,32\n")
    return str(path)


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def kept_files(tmp_path, *names: str) -> list:
    paths = [tmp_path / name for name in names]
    for path in paths:
        path.write_text(KEEP)
    return paths


def test_a_failing_writer_leaves_the_target_as_it_was(tmp_path):
    target = tmp_path / "plan.json"
    target.write_text(KEEP)
    target.chmod(0o640)
    with pytest.raises(RuntimeError), open_replacing(target) as handle:
        handle.write("half a fi")
        raise RuntimeError("killed while writing")
    assert target.read_text() == KEEP and os.listdir(tmp_path) == ["plan.json"]
    with replacing(target) as temporary:
        assert temporary.parent == tmp_path and temporary.suffix == ".json"
        temporary.write_text("new\n")
        assert target.read_text() == KEEP  # replaced only at the end
    assert target.read_text() == "new\n" and os.listdir(tmp_path) == ["plan.json"]
    assert stat.S_IMODE(target.stat().st_mode) == 0o640  # the mode it replaced


@pytest.mark.parametrize("name, suffixes, message", [
    ("folder", None, "is a folder"),
    ("missing/plan.json", None, "does not exist"),
    ("plan.txt", (".json", ".h"), "unknown suffix '.txt'; expected .json, .h"),
    ("plan", (".json",), "no suffix"),
])
def test_outputs_are_refused_before_any_work(tmp_path, name, suffixes, message):
    (tmp_path / "folder").mkdir()
    with pytest.raises(ProblemError, match=message):
        check_output(tmp_path / name, "-o", suffixes)
    check_output(tmp_path / "plan.json", "-o", (".json",))  # a new file in a folder: fine


def test_an_html_folder_is_refused_before_the_plan_file_is_touched(capsys, small, tmp_path):
    (tmp_path / "view.html").mkdir()
    plan, = kept_files(tmp_path, "plan.json")
    code, out, err = run(capsys, "solve", small, "--html", str(tmp_path / "view.html"),
                         "-o", str(plan))
    assert code == BAD_INPUT and "--html: is a folder" in err and out == ""
    assert plan.read_text() == KEEP


@pytest.mark.parametrize("option, name", [("-o", "plan.txt"), ("--csv", "plan.json")])
def test_an_output_suffix_of_no_format_is_refused(capsys, small, tmp_path, option, name):
    code, _, err = run(capsys, "solve", small, option, str(tmp_path / name))
    assert code == BAD_INPUT and "unknown suffix" in err and not (tmp_path / name).exists()


def test_a_plan_above_the_capacity_writes_nothing(capsys, small, tmp_path):
    plan, csv, page = kept_files(tmp_path, "plan.json", "plan.csv", "view.html")
    code, out, _ = run(capsys, "solve", small, "--capacity", "10", "-o", str(plan),
                       "--csv", str(csv), "--html", str(page))
    assert code == FAILED and "not written" in out and "does not fit the capacity" in out
    assert [p.read_text() for p in (plan, csv, page)] == [KEEP] * 3
    code, out, _ = run(capsys, "solve", small, "--capacity", "96", "-o", str(plan), "--json")
    assert code == 0 and json.loads(out)["written"] and plan.read_text() != KEEP


@pytest.fixture
def plan_file(tmp_path) -> tuple[str, dict]:
    """A problem file and the JSON of its plan as ``solve -o`` writes it."""
    problem = Problem([Buffer("a", 64, 0, 2), Buffer("b", 32, 1, 3)], name="two")
    path = tmp_path / "p.json"
    memplan_json.write_problem(path, problem)
    export(problem, plan_with("best", problem), "json", tmp_path / "plan.json")
    return str(path), json.loads((tmp_path / "plan.json").read_text())


@pytest.mark.parametrize("claims, field", [
    ({"status": "optimal", "best_bound": 10**6}, "best_bound"),
    ({"arena_size": 100}, "status"),
    ({"lower_bound": 200}, "lower_bound"),
    ({"regions": {"a": "nowhere", "b": "nowhere"}}, "regions"),
])
def test_plan_claims_that_contradict_themselves_are_refused(capsys, plan_file, tmp_path,
                                                            claims, field):
    problem, document = plan_file
    document["plan"].update(claims)
    lie = tmp_path / "lie.json"
    lie.write_text(json.dumps(document))
    for command in (["validate", problem, str(lie)], ["view", problem, str(lie)]):
        code, _, err = run(capsys, *command)
        assert code == BAD_INPUT and f"lie.json: plan: field '{field}'" in err, (command, err)
        assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("changes, shown", [
    ({"offsets": {"a": 0, "b": 0}, "arena_size": 64}, "overlap"),  # arena 64, bound 96
    ({"arena_size": 100, "status": "feasible"}, "states arena size 100"),
])
def test_an_invalid_plan_is_reported_as_invalid_not_as_a_false_claim(capsys, plan_file,
                                                                      tmp_path, changes,
                                                                      shown):
    problem, document = plan_file
    document["plan"].update(changes)
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps(document))
    code, out, _ = run(capsys, "validate", problem, str(broken))
    assert code == FAILED and "INVALID" in out and shown in out


@pytest.mark.parametrize("stored, named", [
    ({"dims": {"x": -1}, "alignment": "q"}, "dims"),
    ({"alignment": "q"}, "alignment"),
    ({"alignment": 2.5}, "alignment"),
    ({"inplace": 1}, "inplace"),
    ({"weights": ["region"]}, "weights"),
])
def test_bad_model_options_are_named_not_a_python_error(stored, named):
    with pytest.raises(ProblemError) as refused:
        model_options(**stored)
    message = str(refused.value)
    assert message.startswith(f"model options: {named} ")
    assert "not supported" not in message and "TypeError" not in message
    assert np.isscalar(model_options(alignment=64)["alignment"])
