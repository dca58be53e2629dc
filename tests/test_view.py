"""The HTML view: self-contained, its data decodes back to the plan, and `memplan view`.

The page's script runs, painted and used, in test_view_script.py; here the
Python side: what the page embeds must be exactly the problem and the plans.
"""

from __future__ import annotations

import base64
import json
import re
import sys

import numpy as np
import pytest

from memplan import Alias, Buffer, Plan, Problem, plan_with, validate, viz
from memplan.bounds import live_bytes
from memplan.formats import memplan_json, minimalloc_csv
from memplan.problem import Step
from memplan.viz_html import page_data, plan_usage, to_html

from .test_cli_options import run

#   address
#     7K +        +--d--+          a -> b -> c, d; v views a (alias, delta 0)
#     4K +--b-----+--c--+
#        |   a  :v|
#     0  +--------+-----> time 0..6
STEPS = [Step("load", "Input", (), ("a",)), Step("conv", "Conv", ("a",), ("b",)),
         Step("view", "Reshape", ("a",), ("v",)), Step("relu", "Relu", ("b", "v"), ("c",)),
         Step("add", "Add", ("c", "b"), ("d",)), Step("out", "Identity", ("d",), ())]


@pytest.fixture
def small() -> tuple[Problem, Plan, Plan]:
    buffers = [Buffer("a", 4096, 0, 3, kind="input"), Buffer("b", 2048, 1, 5),
               Buffer("v", 4096, 2, 4), Buffer("c", 1024, 3, 5), Buffer("d", 3072, 4, 6,
                                                                         kind="output")]
    problem = Problem(buffers, aliases=[Alias("a", "v")], steps=STEPS, name="small</script>")
    first = plan_with("greedy_by_size", problem)
    other = plan_with("exact", problem, time_limit=5)
    assert validate(problem, first) == [] and validate(problem, other) == []
    return problem, first, other


def embedded(html: str) -> dict:
    """The JSON the page embeds, with its base64 columns decoded into numpy arrays."""
    text = re.search(r"<script type='application/json' id='memplan-data'>(.*?)</script>",
                     html, re.S).group(1)
    document = json.loads(text)

    def decode(value):
        if isinstance(value, list) and len(value) == 2 and value[0] in ("u1", "i4", "u4", "f8") \
                and isinstance(value[1], str):
            return np.frombuffer(base64.b64decode(value[1]), np.dtype(value[0]).newbyteorder("<"))
        if isinstance(value, dict):
            return {k: decode(v) for k, v in value.items()}
        if isinstance(value, list):
            return [decode(v) for v in value]
        return value

    return decode(document)


def test_the_page_is_self_contained(small):
    assert viz.to_html is to_html  # memplan.viz.to_html: the Python entry point
    html = to_html(*small[:2], other_plan=small[2])
    assert not re.search(r"""(src|href)\s*=|url\(|@import|https?://""", html)
    assert html.count("<script") == 2  # the data and the viewer, both inline
    assert "small\\u003c/script>" in html  # a name cannot close the data's script element


def test_the_data_round_trips(small):
    problem, first, other = small
    data = embedded(to_html(problem, first, other_plan=other))
    assert data["ids"] == list(problem.ids)
    assert data["starts"].tolist() == problem.starts.tolist()
    assert data["ends"].tolist() == problem.ends.tolist()
    assert data["sizes"].tolist() == problem.sizes.tolist()
    assert [data["kinds"][k] for k in data["kind"]] == list(problem.kinds)
    assert data["live"].tolist() == live_bytes(problem).tolist()
    assert data["lower_bound"] == first.lower_bound and data["peak_step"] == 3
    for entry, plan in zip(data["plans"], (first, other), strict=True):
        assert entry["offsets"].tolist() == plan.offsets.tolist()
        assert entry["arena_size"] == plan.arena_size and entry["status"] == plan.status
        assert entry["usage"].tolist() == plan_usage(problem, plan).tolist()
    # producer and readers from the steps: b is written by conv (1), read by relu and add
    b = problem.index("b")
    assert data["producer"].tolist() == [0, 1, 2, 3, 4]
    pointer, readers = data["readers_ptr"], data["readers"]
    assert readers[pointer[b]:pointer[b + 1]].tolist() == [3, 4]
    assert data["steps"][1] == ["conv", "Conv"]


def test_large_offsets_stay_exact():
    problem = Problem([Buffer("x", 3, 0, 1), Buffer("y", 5, 0, 1)])
    plan = Plan.from_offsets(problem, [(1 << 40) + 1, 0], planner="hand")
    assert validate(problem, plan) == []
    data = embedded(to_html(problem, plan))
    assert data["plans"][0]["offsets"].dtype == np.float64
    assert data["plans"][0]["offsets"].astype(np.int64).tolist() == [(1 << 40) + 1, 0]


@pytest.mark.parametrize("seed", range(5))
def test_plan_usage_is_the_highest_top_per_step(seed):
    rng = np.random.default_rng(seed)
    n = 60
    starts = rng.integers(0, 40, n)
    problem = Problem.from_arrays(rng.integers(1, 100, n), starts, starts + rng.integers(1, 30, n))
    plan = plan_with("greedy_by_size", problem)
    assert validate(problem, plan) == []
    tops = plan.offsets + problem.sizes
    expected = [max((tops[i] for i in range(n) if problem.starts[i] <= t < problem.ends[i]),
                    default=0) for t in range(problem.horizon)]
    assert plan_usage(problem, plan).tolist() == expected


def test_several_plans_and_a_region(small):
    problem, first, other = small
    data = page_data(problem, {"one": first, "two": other, "three": first})
    assert [p["title"] for p in data["plans"]] == ["one", "two", "three"]
    assert data["plans"][0]["shown"] is None


# ---------------------------------------------------------------- the command line


def test_solve_html_shows_the_best_heuristic_beside_the_exact_plan(capsys, tricky, tmp_path):
    page = tmp_path / "view.html"
    code, out, _ = run(capsys, "solve", tricky, "--planner", "greedy_by_size", "--time-limit",
                       "5", "--html", str(page), "-o", str(tmp_path / "plan.json"))
    assert code == 0 and "wrote html" in out
    data = embedded(page.read_text())
    problem = memplan_json.read_problem(tmp_path / "plan.json")
    heuristic, final = data["plans"]
    assert heuristic["arena_size"] == 14 and final["arena_size"] == 11
    for entry in data["plans"]:
        plan = Plan.from_offsets(problem, entry["offsets"].astype(np.int64), planner="page")
        assert validate(problem, plan) == []


def test_view_reads_a_solve_file_alone_or_a_problem_and_its_plans(capsys, tricky, tmp_path):
    solved = tmp_path / "plan.json"
    assert run(capsys, "solve", tricky, "--time-limit", "5", "-o", str(solved))[0] == 0
    code, out, _ = run(capsys, "view", str(solved))
    assert code == 0 and (tmp_path / "plan.html").exists() and "1 plan" in out
    problem = memplan_json.read_problem(tricky)
    greedy = plan_with("greedy_by_size", problem)
    assert validate(problem, greedy) == []
    minimalloc_csv.write_csv(tmp_path / "greedy.csv", problem, greedy)
    memplan_json.write_plan(tmp_path / "greedy.json", problem, greedy)
    out_page = tmp_path / "both.html"
    code, out, _ = run(capsys, "view", str(solved), str(tmp_path / "greedy.csv"), "-o",
                       str(out_page))
    assert code == 0 and "2 plans" in out
    titles = [p["title"] for p in embedded(out_page.read_text())["plans"]]
    assert titles[0].startswith("plan.json: best") and titles[1] == "greedy.csv: greedy"
    code, out, _ = run(capsys, "view", tricky, str(tmp_path / "greedy.json"), "-o",
                       str(out_page))
    assert code == 0 and embedded(out_page.read_text())["plans"][0]["offsets"].tolist() == \
        greedy.offsets.tolist()


def test_view_binds_the_symbolic_dimensions_of_an_onnx_model(capsys, tmp_path):
    from tests.test_reliability import symbolic_model

    model = tmp_path / "sym.onnx"
    model.write_bytes(symbolic_model().SerializeToString())
    solved = tmp_path / "plan.csv"
    assert run(capsys, "solve", str(model), "--dim", "n=2", "--dim", "m=8", "--no-exact",
               "--csv", str(solved))[0] == 0
    code, _, err = run(capsys, "view", str(model), str(solved))
    assert code == 2 and "--dim" in err and "Traceback" not in err
    code, out, _ = run(capsys, "view", str(model), str(solved), "--dim", "n=2", "--dim",
                       "m=8", "-o", str(tmp_path / "sym.html"))
    assert code == 0 and "1 plan" in out
    code, _, err = run(capsys, "view", str(model), str(solved), "--dim", "n=4", "--dim",
                       "m=8", "-o", str(tmp_path / "sym.html"))
    assert code == 1 and "INVALID" in err  # other sizes: the plan's buffers overlap


def test_view_refuses_what_it_cannot_show(capsys, tricky, tmp_path):
    code, _, err = run(capsys, "view", tricky)
    assert code == 2 and "holds a problem but no plan" in err
    code, _, err = run(capsys, "view", tricky, tricky, "-o", str(tmp_path / "x.png"))
    assert code == 2 and "give a name ending in .html" in err and "Traceback" not in err


def test_view_draws_an_invalid_plan_and_exits_1(capsys, tricky, tmp_path):
    problem = memplan_json.read_problem(tricky)
    broken = Plan.from_offsets(problem, np.zeros(len(problem), np.int64), planner="broken")
    memplan_json.write_plan(tmp_path / "broken.json", problem, broken)
    code, out, err = run(capsys, "view", tricky, str(tmp_path / "broken.json"))
    assert code == 1 and "INVALID" in err and "overlap" in err
    assert "INVALID" in (tmp_path / "broken.html").read_text()


@pytest.mark.parametrize("argv, message", [
    (["--plot", "layout.html"], "for an interactive page use --html"),
    (["--plot", "layout.xyz"], "matplotlib cannot write .xyz"),
    (["--html", "view.png"], "give a name ending in .html"),
    (["--html", "missing/view.html"], "does not exist"),
    (["--window", "0:10"], "give --plot FILE.png"),
])
def test_figure_outputs_are_checked_before_solving(capsys, tricky, tmp_path, argv, message):
    argv = [a if not a.startswith(("layout", "view", "missing")) else str(tmp_path / a)
            for a in argv]
    plan_file = tmp_path / "plan.json"
    code, out, err = run(capsys, "solve", tricky, "-o", str(plan_file), *argv)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
    assert not plan_file.exists() and out == ""  # nothing was solved


def test_plot_without_matplotlib_is_refused_before_solving(capsys, tricky, tmp_path,
                                                           monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)  # as if not installed
    plan_file = tmp_path / "plan.json"
    code, out, err = run(capsys, "solve", tricky, "-o", str(plan_file), "--plot",
                         str(tmp_path / "layout.png"))
    assert code == 2 and "--plot needs matplotlib: pip install 'memplan[plot]'" in err
    assert not plan_file.exists() and out == ""


def test_explain_checks_its_plot_first(capsys, tricky, tmp_path):
    code, out, err = run(capsys, "explain", tricky, "--plot", str(tmp_path / "gap.html"))
    assert code == 2 and "for an interactive page use --html" in err and out == ""
