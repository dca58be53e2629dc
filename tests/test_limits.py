"""Every library call keeps its time limit: compare, explain and the order search.

The limits are checked by what the calls did with them (the seconds each
planner was given, the parts a call skipped or cut and says so), never by a
stopwatch; every plan is checked by the validator. Wall-clock figures are in
benchmarks/time_limits.py.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from benchmarks.generate import network_like
from benchmarks.large import transformer_decoder
from benchmarks.traces import training_step_trace
from memplan import api, plan_with, validate
from memplan.bounds import live_bytes, lower_bound
from memplan.cli import checks, main
from memplan.diagnosis import what_if
from memplan.diagnosis.capacity_reason import _Checker, _load_at, _over_capacity
from memplan.diagnosis.explain import explain
from memplan.formats import minimalloc_csv
from memplan.formats.memplan_json import write_problem
from memplan.heuristics import anneal
from memplan.heuristics.units import Units
from memplan.registry import CEILING, ceiling_planner
from memplan.stopping import on_ctrl_c, watched

from .conftest import CHALLENGING


@pytest.fixture(scope="module")
def trace():
    return training_step_trace(3000, seed=2)


def given_limits(monkeypatch) -> list[tuple[str, float | None, float, float | None, float]]:
    """(planner, time_limit, when: a `time.perf_counter` value, cpu budget, the CPU seconds
    of the thread by then) of every plan `api.compare` asks for (its budget's limit and
    allowance)."""
    asked: list[tuple[str, float | None, float, float | None, float]] = []
    plan_with_ = api.plan_with

    def recording(name, problem, **options):
        budget = options.get("budget")
        limit, cpu = (options.get("time_limit"), options.get("cpu")) if budget is None else \
            (budget.limit, budget.cpu)
        asked.append((name, limit, time.perf_counter(), cpu, time.thread_time()))
        return plan_with_(name, problem, **options)

    monkeypatch.setattr(api, "plan_with", recording)
    return asked


def test_compare_gives_every_planner_a_share_of_its_limit(monkeypatch, trace):
    import pandas  # noqa: F401  (compare imports it before its clock starts)

    asked = given_limits(monkeypatch)
    began, cpu_began = time.perf_counter(), time.thread_time()
    table = api.compare({"trace": trace}, time_limit=3.0, began=began)
    (ceiling, uncut, *_), *timed = asked  # the ceiling first, uncut as in `solve`
    assert ceiling in (CEILING, "time_sweep") and uncut is None
    assert timed and all(limit is not None and when + limit <= began + 3.05
                         for _, limit, when, _, _ in timed)  # the wall clock: the limit
    # the heuristics' half in CPU seconds, each a slice of what is left of it (a planner that
    # ends early leaves its time to the next ones): none is given a budget past the half
    budgets = [(cpu, spent - cpu_began) for name, _, _, cpu, spent in asked
               if name != "exact" and cpu is not None]
    assert budgets and all(spent + cpu <= 1.5 + 0.05 for cpu, spent in budgets)
    ran = dict(zip(table["planner"], table["arena_size"], strict=True))
    assert set(ran) | set(table.attrs["skipped"].get("trace", ())) == \
        {*api.heuristic_names(), "exact"}
    assert min(ran.values()) >= api.lower_bound(trace)


def test_compare_without_time_skips_all_but_one_planner_and_says_so(trace):
    table = api.compare({"trace": trace}, time_limit=0)
    assert len(table) == 1 and table.attrs["interrupted"] is False
    skipped = table.attrs["skipped"]["trace"]
    ceiling = ceiling_planner(trace, 0.0)  # the one plan: the ceiling, uncut (as in `solve`)
    assert [table["planner"][0], *skipped] == \
        [ceiling, *(p for p in api.heuristic_names() if p != ceiling), "exact"]


def test_compare_stops_when_asked(trace):
    stop = threading.Event()
    stop.set()
    table = api.compare({"trace": trace}, time_limit=5, stop=stop)
    assert table.empty and table.attrs["interrupted"]


def test_anneal_starts_no_chain_the_deadline_cannot_hold(trace):
    units = Units.build(trace, pairs=False)
    starts = anneal.start_orders(units, None)
    slow = [start._replace(cpu=60.0) for start in starts]  # a decode longer than the limit
    offsets, stats = anneal.search(units, slow, deadline=time.perf_counter() + 1.0)
    assert offsets is None and stats["evaluations"] == 0 and stats["skipped"]
    plan = plan_with("anneal", trace, time_limit=0)  # no time: the best start's plan
    assert validate(trace, plan) == [] and plan.arena_size >= api.lower_bound(trace)


def test_best_skips_the_order_search_when_no_chain_fits_its_deadline(monkeypatch):
    problem = minimalloc_csv.read_problem(CHALLENGING / "A.1048576.csv", capacity=None)
    monkeypatch.setattr(anneal, "_chains", lambda *args: [])
    plan = plan_with("best", problem, search_evaluations=100)
    assert validate(problem, plan) == [] and "anneal" in plan.stats["skipped"]


def test_explain_cuts_what_its_limit_leaves_no_time_for(trace):
    capacity = int(live_bytes(trace).max()) // 2  # below the live load: a live-load reason
    found = explain(trace, plan_with("greedy_by_size", trace), capacity=capacity,
                    time_limit=1e-6)
    reason = found.capacity
    assert reason.kind == "live_load" and reason.proven and not reason.minimal
    members = [trace.index(t.id) for t in reason.tensors]
    assert _load_at(trace, members, reason.step) > capacity  # still a proof
    assert "remedies" in found.unmeasured and "cut short by the time limit" in str(found)


@pytest.mark.parametrize("seed", range(4))
def test_the_live_load_shrink_without_aliases_keeps_a_smallest_proof(seed):
    problem = network_like(300, seed)
    load = live_bytes(problem)
    step = int(np.argmax(load))
    capacity = int(load[step]) * 2 // 3
    live = np.flatnonzero((problem.starts <= step) & (problem.ends > step))
    kept = _over_capacity(_Checker(problem, capacity, 10.0, 1), live, step)
    assert _load_at(problem, kept, step) > capacity
    smallest = min(kept, key=lambda i: (int(problem.sizes[i]), -i))
    rest = [i for i in kept if i != smallest]
    assert not rest or _load_at(problem, rest, step) <= capacity  # none left to drop


def test_ctrl_c_raises_unless_a_run_watches_the_stop_event():
    stop = threading.Event()
    with watched(stop):
        on_ctrl_c(stop)  # the exact planner looks at the event itself
    assert stop.is_set()
    with watched(stop), pytest.raises(KeyboardInterrupt):
        on_ctrl_c(stop)  # a second Ctrl-C aborts
    fresh = threading.Event()
    with pytest.raises(KeyboardInterrupt):
        on_ctrl_c(fresh)  # nothing watches: the heuristics catch it
    assert fresh.is_set()


def test_ctrl_c_in_the_heuristics_keeps_the_plans_so_far(monkeypatch, trace):
    plan_with_ = api.plan_with

    def interrupted_second(name, problem, **options):
        if name == "greedy_by_size":
            raise KeyboardInterrupt
        return plan_with_(name, problem, **options)

    monkeypatch.setattr(api, "plan_with", interrupted_second)
    plans = api.run_heuristics(trace, ["best_fit", "greedy_by_size", "naive"])
    assert list(plans) == ["best_fit"] and plans["best_fit"].stats["interrupted"]
    assert validate(trace, plans["best_fit"]) == []
    with pytest.raises(KeyboardInterrupt):  # no plan yet: nothing to keep
        api.run_heuristics(trace, ["greedy_by_size"])


@pytest.mark.parametrize("command", [["solve"], ["compare", "--planners", "greedy_by_size"],
                                     ["explain"], ["explain", "--planner", "none"]],
                         ids=["solve", "compare", "explain", "explain-no-plan"])
def test_commands_say_first_when_the_work_no_limit_cuts_cannot_fit(monkeypatch, tmp_path,
                                                                   capsys, command):
    path = tmp_path / "net.json"
    write_problem(path, network_like(300, 4))
    assert main([command[0], str(path), "--time-limit", "5", *command[1:]]) == 0
    assert "beyond --time-limit" not in capsys.readouterr().err  # 300 buffers fit 5 s
    monkeypatch.setattr(checks, "command_pace", lambda: 1e4)  # as if a core were 10^4x slower
    assert main([command[0], str(path), "--time-limit", "5", *command[1:]]) == 0
    said = [line for line in capsys.readouterr().err.splitlines() if "beyond" in line]
    assert len(said) == 1 and said[0].startswith(f"memplan {command[0]}: 300 buffers: "
                                                 f"reading took ")
    assert said[0].endswith("s more, beyond --time-limit 5")


def test_a_long_reading_alone_is_not_said_the_work_after_it_is(monkeypatch, capsys):
    """The limit promises its seconds + 10 % after the reading: a reading of 100 s with
    work that fits is silent; work of the limit + 10 % and more after it is said, with the
    estimate of `CEILING_CPU_PER_BUFFER` a buffer at the command's pace."""
    monkeypatch.setattr(checks, "command_spent", lambda: 100.0)
    monkeypatch.setattr(checks, "command_pace", lambda: 1.0)
    per_second = int(1 / checks.CEILING_CPU_PER_BUFFER)  # buffers a CPU second
    checks.warn_beyond_limit("solve", 5 * per_second, 5.0, "one pass")  # 5 s: fits 5.5
    assert capsys.readouterr().err == ""
    checks.warn_beyond_limit("solve", 6 * per_second, 5.0, "one pass")  # 6 s: does not
    said = capsys.readouterr().err
    assert said.startswith("memplan solve: ") and "reading took 100.0 s" in said
    assert said.rstrip().endswith("need about 6.0 s more, beyond --time-limit 5")
    checks.warn_beyond_limit("solve", 5 * per_second, 5.0, "one pass", after=1.0)  # outputs
    assert "need about 6.0 s more" in capsys.readouterr().err


def test_explain_prices_its_own_work_at_its_constant(monkeypatch, tmp_path, capsys):
    """`explain --planner none` says it cannot keep its limit when `EXPLAIN_CPU_PER_BUFFER`
    a buffer, at the command's pace, needs more than the limit + 10 %, and not otherwise."""
    from memplan.cli import explain as explain_command

    path = tmp_path / "net.json"
    write_problem(path, network_like(300, 4))
    monkeypatch.setattr(checks, "command_pace", lambda: 1.0)
    monkeypatch.setattr(explain_command, "EXPLAIN_CPU_PER_BUFFER", 4.5 / 300)
    assert main(["explain", str(path), "--time-limit", "5", "--planner", "none"]) == 0
    assert "beyond" not in capsys.readouterr().err  # 4.5 s of 5.5
    monkeypatch.setattr(explain_command, "EXPLAIN_CPU_PER_BUFFER", 6.0 / 300)
    assert main(["explain", str(path), "--time-limit", "5", "--planner", "none"]) == 0
    assert "need about 6.0 s more, beyond --time-limit 5" in capsys.readouterr().err


def _changed_row_by_row(problem, changes):
    """The changed problem built from `Buffer` rows, as explain built it before."""
    buffers = [piece for b in problem.buffers for piece in changes.get(b.id, [b])]
    return problem.replace(buffers=buffers, widths=None, steps=None)


def test_remedies_measure_the_bound_of_the_changed_problem_and_stop_in_time(monkeypatch):
    decoder = transformer_decoder(2000, 1)  # steps, views and in-place aliases
    tensors = [decoder.ids[i] for i in np.argsort(-decoder.sizes)[:4]] + ["reshape_1"]
    # (the mask as every head reads it: a view, recomputed for each later reader)
    built = []
    monkeypatch.setattr(what_if, "lower_bound", lambda p: built.append(p) or lower_bound(p))
    found = what_if.remedies(decoder, tensors)
    assert {r.change for r in found} >= {"end_earlier", "split", "recompute"}
    for remedy, changed in zip(found, built[1:], strict=True):  # the first: the bound itself
        pieces = {b.id: b for b in changed.buffers}
        changes = {}
        for id in changed.ids:
            base = id.split("@")[0]
            changes.setdefault(base, []).append(pieces[id])
        slow = _changed_row_by_row(decoder, changes)
        assert remedy.bound == lower_bound(slow)
        assert sorted(slow.ids) == sorted(changed.ids)
    cut: list[str] = []
    soon = time.perf_counter() + 1e-9  # past before the second change: only the first runs
    assert len(what_if.remedies(decoder, tensors, deadline=soon, cut=cut)) <= 1
    assert cut == ["remedies"]


def test_explain_skips_the_constant_folding_past_its_limit(trace):
    found = explain(transformer_decoder(2000, 1), time_limit=1e-6)
    assert {"remedies", "constant folding"} <= set(found.unmeasured)
    assert found.folding == ()
