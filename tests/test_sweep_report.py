"""The sweep report page: styled, sortable tables in human units, each row's plan one click away.

The tasks run here in the test process (`run_task`, as a worker runs them),
writing their plans into a folder; the report then builds one interactive
page per model shape, and every plan on those pages is validated again.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import unquote

import numpy as np
import pandas as pd
import pytest

from memplan import Buffer, Plan, Problem, load, validate
from memplan.formats import memplan_json
from memplan.sweeps.sweep_io import COLUMNS
from memplan.sweeps.sweep_plans import plan_file
from memplan.sweeps.sweep_report import report_html, write_report
from memplan.sweeps.sweep_tasks import make_tasks, run_task

from .test_view import embedded

pytest.importorskip("matplotlib")


@pytest.fixture
def swept(tmp_path) -> tuple[pd.DataFrame, Path]:
    """Two models x (no capacity, 12 B) x three planners, plans kept in a folder."""
    memplan_json.write_problem(tmp_path / "frag.json", Problem(
        [Buffer("a", 3, 0, 2, alignment=4), Buffer("b", 3, 1, 3, alignment=4),
         Buffer("c", 2, 0, 3)], name="frag"))
    (tmp_path / "chain.csv").write_text("id,lower,upper,size\nb1,0,3,4\nb2,3,9,4\nb3,1,5,2\n")
    (tmp_path / "bad.csv").write_text("id,lower,upper,size\nb1,0,3,four\n")
    plans = tmp_path / "plans"
    plans.mkdir()
    tasks = make_tasks([tmp_path / "frag.json", tmp_path / "chain.csv", tmp_path / "bad.csv"],
                       capacities=[None, "12B"], planners=["greedy_by_size", "best", "exact"],
                       time_limit=5)
    rows = [run_task(task, str(plans)) for task in tasks]
    return pd.DataFrame(rows, columns=list(COLUMNS)).astype(COLUMNS), plans


def test_the_page_is_styled_sortable_and_readable(swept):
    table, _ = swept
    page = report_html(table)
    assert "<NA>" not in page and "nan" not in page and "border=" not in page
    assert page.count("class='sortable'") >= 2 and "th.onclick" in page
    assert "12 B" in page  # capacities and sizes in human units, sorted by raw bytes
    assert re.search(r"data-v='12\.0'>12 B<", page)
    assert "<td class='error'>error</td>" in page and "bad.csv:2" in page


def test_every_planned_row_links_to_its_plan(swept, tmp_path):
    table, plans = swept
    report = tmp_path / "out" / "report.html"
    report.parent.mkdir()
    write_report(table, str(report), plans=str(plans))
    page = report.read_text()
    links = re.findall(r"<a href='([^']+)'>view</a>", page)
    planned = table[table["status"] != "error"]
    assert len(links) == len(planned) == 12
    pages = {link.split("#")[0] for link in links}
    assert len(pages) == 2  # one page per model shape, all its plans in it
    for link in links:
        file, _, fragment = link.partition("#plan=")
        data = embedded((report.parent / file).read_text())
        titles = [p["title"] for p in data["plans"]]
        assert unquote(fragment) in titles and len(titles) == 6
    for link, (_, row) in zip(links, planned.iterrows(), strict=True):  # the row's own plan
        file, _, fragment = link.partition("#plan=")
        data = embedded((report.parent / file).read_text())
        entry = next(p for p in data["plans"] if p["title"] == unquote(fragment))
        assert entry["arena_size"] == row["arena_size"] and entry["planner"] == row["planner"]
        problem = load(row["path"])
        plan = Plan.from_offsets(problem, entry["offsets"].astype(np.int64), planner="page")
        assert validate(problem, plan) == []


def test_a_stale_or_broken_plan_gets_no_link(swept, tmp_path):
    table, plans = swept
    first, second = table[table["status"] != "error"]["task"].iloc[:2]
    stale = json.loads(plan_file(plans, first).read_text())
    stale["offsets"].popitem()  # the model changed since: a buffer the plan does not know
    plan_file(plans, first).write_text(json.dumps(stale))
    plan_file(plans, second).write_text("{not json")
    report = tmp_path / "report.html"
    write_report(table, str(report), plans=str(plans))
    assert len(re.findall(r">view</a>", report.read_text())) == 10


def test_a_plan_that_cannot_be_written_costs_only_its_link(tmp_path):
    memplan_json.write_problem(tmp_path / "one.json", Problem([Buffer("a", 4, 0, 2)]))
    task, = make_tasks([tmp_path / "one.json"], planners=["greedy_by_size"])
    row = run_task(task, str(tmp_path / "missing" / "folder"))
    assert row["status"] == "optimal" and row["valid"]
