"""The budget: what is left of a limit, in CPU seconds within a wall deadline; the table."""

from __future__ import annotations

import ast
import re
import time
from pathlib import Path

import pytest

import memplan
from memplan import budget, shares
from memplan.budget import Budget

ROOT = Path(memplan.__file__).parent
TIME_WORDS = re.compile(r"(_SHARE$|MARGIN|RESERVE$|_SECONDS$|PACE|LEAST|SLACK|PER_SECOND)")


def _burn(cpu: float) -> None:
    """Take ``cpu`` seconds of this thread's CPU."""
    end = time.thread_time() + cpu
    while time.thread_time() < end:
        pass


def test_a_limit_is_a_deadline_and_an_allowance():
    assert Budget.of_limit(None).left() is None and not Budget.of_limit(None).expired()
    wall = Budget.of_limit(5.0, began=100.0)
    assert wall.deadline == 105.0 and wall.cpu is None
    timed = Budget.of_limit(60.0, cpu=0.05)
    assert 0.0 < timed.left() <= 0.05 and not timed.expired()
    _burn(0.06)
    assert timed.left() < 0 and timed.expired()
    assert Budget.of_limit(0.0).expired()


def test_cp_sat_gets_the_wall_left_and_the_cpu_left(monkeypatch):
    assert Budget.of_limit(None).cp_limits() == (None, None)
    wall, cpu = Budget.of_limit(10.0, cpu=3.0).cp_limits()
    assert 9.0 < wall <= 10.0 and 2.9 < cpu <= 3.0
    late = Budget.of_limit(10.0, began=time.perf_counter() - 20.0)
    assert late.cp_limits() == (shares.MIN_STAGE_SECONDS, None)  # a stage gets its least


def test_the_pace_is_wall_seconds_per_cpu_second(monkeypatch):
    clock = Budget.of_limit(None)
    _burn(2 * shares.PACE_CPU)
    began = time.perf_counter
    monkeypatch.setattr(time, "perf_counter", lambda: began() + 1.0)  # a second of load
    assert clock.pace() > 10
    assert clock.until(None, clock.spent() + 0.01) - time.perf_counter() > 0.1


def test_a_command_keeps_its_least_share_however_long_loading_took(monkeypatch):
    from memplan import startup

    monkeypatch.setattr(startup, "COMMAND_STARTED", time.perf_counter() - 3.0)
    assert 6.0 < budget.command_left(10.0) <= 7.0
    assert budget.command_left(10.0, after=1.0) <= 6.0
    assert budget.command_left(2.0) == pytest.approx(shares.COMMAND_LEAST_SHARE * 2.0)
    assert time.perf_counter() - 3.1 < budget.command_start(10.0) <= time.perf_counter() - 2.9


def test_every_time_constant_of_the_package_is_in_the_table():
    """Shares, margins and reserves of a time limit are defined in `memplan.shares` only
    (other modules import them by name), each with a comment."""
    elsewhere = []
    for path in ROOT.rglob("*.py"):
        if path.name == "shares.py":
            continue
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names = [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
                elsewhere += [f"{path.name}: {n}" for n in names
                              if n.isupper() and TIME_WORDS.search(n)]
    assert elsewhere == []
    lines = (ROOT / "shares.py").read_text().splitlines()
    defined = [line for line in lines if re.match(r"^[A-Z_, ]+ = ", line)]
    assert len(defined) > 30 and all("  # " in line for line in defined)


WAITS = {"wait", "sleep", "join"}  # calls whose number is a time (``str.join`` takes none)
TIMED = {"seconds", "cpu", "time_limit", "timeout", "wall", "deadline"}  # keywords of a time


def time_literals(source: str) -> list[int]:
    """Lines of ``source`` that give a time as a number rather than by a name of the table: a
    number waited on, or a number (but 0 and 1, none and the whole) inside a timed keyword."""
    def numbers(node) -> bool:
        return any(isinstance(n, ast.Constant) and type(n.value) in (int, float) and
                   n.value not in (0, 1) for n in ast.walk(node))

    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        name = getattr(node.func, "attr", getattr(node.func, "id", ""))
        waited = [a for a in node.args if isinstance(a, ast.Constant) and
                  type(a.value) in (int, float)] if name in WAITS else []
        if waited or any(k.arg in TIMED and numbers(k.value) for k in node.keywords):
            found.append(node.lineno)
    return found


def test_no_time_is_given_as_a_bare_number():
    """A wait, a poll or a stage's seconds are named in `memplan.shares`, not written inline."""
    found = [f"{path.relative_to(ROOT)}:{line}" for path in ROOT.rglob("*.py")
             if path.name not in ("shares.py", "budget.py")
             for line in time_literals(path.read_text())]
    assert found == []


def test_the_time_literal_check_sees_one():
    assert time_literals("event.wait(0.05)\n") == [1]
    assert time_literals("x = solve(p, seconds=max(0.01, left))\n") == [1]
    assert time_literals("x = solve(p, seconds=max(LEAST_SECONDS, left), seed=3)\n") == []
    assert time_literals("', '.join(names[:3])\nevent.wait(POLL_SECONDS)\n") == []


def test_split_gives_a_child_its_allowance_by_the_deadline():
    parent = Budget.of_limit(60.0, cpu=10.0)
    child = parent.split(2.0)
    assert child.cpu == 2.0 and child.deadline == pytest.approx(parent.deadline, abs=1e-6)
    assert child.limit == pytest.approx(60.0, abs=0.5)
    # a planner that spends no allowance runs for it at the parent's pace (1: nothing spent)
    assert child.seconds == pytest.approx(2.0, abs=0.05)
    assert child.wall_end() == pytest.approx(child.began + child.seconds)
    sooner = parent.split(None, parent.deadline - 30.0)
    assert sooner.cpu is None and sooner.seconds == sooner.limit == pytest.approx(30.0, abs=0.5)
    open_ended = Budget.of_limit(None).split(1.0)
    assert open_ended.deadline is None and open_ended.limit is None
    assert open_ended.seconds == pytest.approx(1.0, abs=0.05)


def test_a_budget_of_a_limit_keeps_the_limit_and_the_seconds_to_run():
    assert (Budget.of_limit(5.0).limit, Budget.of_limit(5.0).seconds) == (5.0, 5.0)
    both = Budget.of_limit(5.0, cpu=2.0)
    assert (both.limit, both.seconds) == (5.0, 2.0)
    assert Budget.of_limit(None).wall_end() is None


def test_a_stopwatch_times_wall_and_cpu_seconds():
    """CPU seconds never outrun wall seconds, but the two clocks are read a few
    microseconds apart and tick at their own resolutions: a millisecond is allowed."""
    watch = budget.Stopwatch()
    _burn(0.02)
    cpu = watch.cpu_elapsed()
    assert watch.elapsed() >= cpu - 1e-3 and cpu >= 0.015
    assert budget.Stopwatch(ago=5.0).elapsed() >= 5.0  # a run timed elsewhere
    clock = Budget.of_limit(None)  # a budget is one too: its seconds since it was made
    _burn(0.01)
    spent = clock.spent()
    assert clock.elapsed() >= spent - 1e-3 and spent >= 0.005


def test_the_allowance_is_the_cpu_else_the_limit_and_a_stage_gets_the_wall_left():
    assert Budget.of_limit(5.0).allowance() == 5.0
    assert Budget.of_limit(5.0, cpu=2.0).allowance() == 2.0
    assert Budget.of_limit(None).allowance() is None
    assert Budget(None, 105.0, limit=5.0).limit == 5.0  # given: kept as it is
    late = Budget.of_limit(10.0, began=time.perf_counter() - 20.0).stage(cpu=1.0)
    assert (late.limit, late.cpu) == (shares.MIN_STAGE_SECONDS, 1.0)  # its least
    assert Budget.of_limit(None).stage().deadline is None
    fresh = Budget.of_limit(10.0).stage()
    assert 9.0 < fresh.limit <= 10.0 and fresh.cpu is None


def test_share_gives_a_stage_its_part_of_the_wall_left():
    """`Budget.share`: what `memplan.solve`'s stages get of its one budget (the heuristics'
    part of the limit, each part's share of what is left, the exact planner's rest less
    the validation's reserve), never below 0."""
    began = time.perf_counter() - 4.0  # 4 s of a 10 s limit gone
    parent = Budget.of_limit(10.0, began=began)
    assert parent.share().limit == pytest.approx(6.0, abs=0.05)
    assert parent.share(0.25).limit == pytest.approx(1.5, abs=0.05)
    assert parent.share(by=0.5).limit == pytest.approx(1.0, abs=0.05)
    assert parent.share(keep=1.0, cpu=2.0).limit == pytest.approx(5.0, abs=0.05)
    assert parent.share(keep=1.0, cpu=2.0).cpu == 2.0
    assert parent.share(by=0.3).limit == 0.0  # the heuristics' part is gone
    assert Budget.of_limit(None).share(0.5, cpu=1.0).limit is None
    assert Budget.of_limit(None).share(0.5, cpu=1.0).cpu == 1.0
