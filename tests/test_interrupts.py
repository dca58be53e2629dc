"""Ctrl-C ends every command within about a second, keeping what it has, with exit 130.

Each command runs in a child process, as a user runs it; the child says on stderr
when its first plan exists (a wrapper around the heuristics' and the validator's
calls, and the exact planner's first report), and SIGINT comes a second later, while
the command certainly still works: in the heuristics or in the exact planner. The
verdict is the exit code and the plan kept (read back and validated); how fast the
command ends is measured in benchmarks/time_limits.py, here only bounded loosely, to
catch a command that ignores the signal.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import memplan
from memplan import validate
from memplan.cli.exit_codes import INTERRUPTED
from memplan.formats import memplan_json

from .conftest import CHALLENGING

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGINT is POSIX")

DRIVER = """
import sys
from memplan import api
from memplan.cli import main
from memplan.heuristics import best
from memplan.solver import exact

def announced(call):
    def run(*args, **options):
        if not announced.done:  # the first plan exists
            print("planned", file=sys.stderr, flush=True)
            announced.done = True
        return call(*args, **options)
    return run

announced.done = False
best.Run.keep = announced(best.Run.keep)
api._checked = announced(api._checked)
exact._Run.report = announced(exact._Run.report)  # the exact planner's first report
sys.exit(main(sys.argv[1:]))
"""
HANG = 60  # seconds: a command still running this long after Ctrl-C ignored it


PROBLEM = str(CHALLENGING / "D.1048576.csv")  # MiniMalloc's D: seconds of search at any limit
NO_CAPACITY = ("--capacity", "none")


def interrupted(*argv: str, after: float = 1.0, driver: str = DRIVER
                ) -> tuple[int, str, str, float]:
    """Run ``memplan argv``, Ctrl-C ``after`` seconds after its first plan (or what
    ``driver`` announces as "planned"): (exit code, stdout, stderr, seconds from the
    signal to the exit)."""
    child = subprocess.Popen([sys.executable, "-c", driver, *argv], text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = child.stderr.readline()
    while first and first.strip() != "planned":  # a warning first
        first = child.stderr.readline()
    assert first.strip() == "planned", first + child.stderr.read()
    time.sleep(after)
    child.send_signal(signal.SIGINT)
    sent = time.perf_counter()
    out, err = child.communicate(timeout=HANG)
    return child.returncode, out, first + err, time.perf_counter() - sent


def kept(path) -> None:
    """The plan file is there and valid for the problem it holds."""
    problem = memplan_json.read_problem(path)
    assert validate(problem, memplan_json.read_plan(path, problem)) == []


def test_ctrl_c_in_the_heuristics_keeps_their_best_plan(tmp_path):
    output = tmp_path / "plan.json"
    code, out, err, _ = interrupted("solve", PROBLEM, *NO_CAPACITY, "--no-exact",
                                    "--time-limit", "120", "-o", str(output), "--json")
    assert code == INTERRUPTED, err
    summary = json.loads(out)
    assert summary["interrupted"] and summary["exact"] is None
    assert summary["written"] and "interrupted" in err
    kept(output)


def test_ctrl_c_in_the_exact_planner_keeps_its_best_plan(tmp_path):
    output = tmp_path / "plan.json"
    code, out, err, _ = interrupted("solve", PROBLEM, *NO_CAPACITY, "--time-limit", "120",
                                    "--planner", "time_sweep", "-o", str(output), "--json",
                                    after=2.0)
    assert code == INTERRUPTED, err
    summary = json.loads(out)
    assert summary["interrupted"] and summary["exact"] is not None
    assert summary["plan"]["arena_size"] <= summary["heuristic"]["arena_size"]
    kept(output)


def test_ctrl_c_ends_explain_and_compare():
    # Both commands must still be at work when the signal comes, on any machine: explain's
    # default planner (best) and its analysis of D end within about a second of the first
    # plan on a quiet machine, so explain plans with the exact planner, which searches D
    # for its whole share (a third of the limit, 40 s) without proving a plan optimal;
    # compare spends the whole limit on D (timed heuristic searches, then the exact planner).
    for argv in (("explain", PROBLEM, *NO_CAPACITY, "--time-limit", "120", "--planner", "exact"),
                 ("compare", PROBLEM, *NO_CAPACITY, "--time-limit", "120")):
        code, out, err, _ = interrupted(*argv)
        assert code == INTERRUPTED and "interrupted" in err, (argv, err)


PROVING = """
import sys
import time
from memplan.cli import main
from memplan.onnx import onnx_arena

run_node = onnx_arena.ArenaRunner._run_node

def slowed(self, *args, **kwargs):  # the proof announces its first node; each takes 50 ms
    if not slowed.done:
        print("planned", file=sys.stderr, flush=True)
        slowed.done = True
    time.sleep(0.05)
    return run_node(self, *args, **kwargs)

slowed.done = False
onnx_arena.ArenaRunner._run_node = slowed
sys.exit(main(sys.argv[1:]))
"""


def test_ctrl_c_ends_prove(tmp_path):
    # prove has no time limit (it runs the model once per node, as long as that takes);
    # Ctrl-C ends it between two nodes
    model, plan = str(Path(memplan.__file__).parent / "data" / "squeezenet.onnx"), \
        tmp_path / "plan.json"
    subprocess.run([sys.executable, "-m", "memplan.cli", "solve", model, "--no-exact", "-o",
                    str(plan), "--quiet"], check=True, timeout=HANG)
    code, out, err, _ = interrupted("prove", model, str(plan), after=0.5, driver=PROVING)
    assert code == INTERRUPTED and "PROVEN" not in out, err


def test_ctrl_c_ends_a_compiled_pass_at_once_and_best_keeps_its_plans(monkeypatch):
    """A greedy pass over a 30k-buffer training step takes a CPU second (4 s beside busy
    processes) in C; the kernel runs Python's signal handlers every 50 ms, so a Ctrl-C
    ends it at once rather than at its end (counted in CPU seconds of this thread: the
    same on a busy machine). `best` then returns the plans it had: the time sweep's."""
    import os
    import threading

    from benchmarks.traces import training_step_trace
    from memplan.heuristics import best, compiled_place
    from memplan.heuristics.order import order_units
    from memplan.heuristics.units import Units
    from memplan.solver.canonical import ThreadClock

    problem = training_step_trace(30000, 2)
    units = Units.build(problem, pairs=False)
    order = order_units(units, "size")
    clock = ThreadClock()
    clock.begin()
    signalled = []

    def ctrl_c_after(cpu: float):  # SIGINT once this thread has taken ``cpu`` more seconds
        began = clock.seconds()

        def send():
            while clock.seconds() - began < cpu:
                time.sleep(0.002)
            signalled.append(clock.seconds())
            os.kill(os.getpid(), signal.SIGINT)

        threading.Thread(target=send, daemon=True).start()

    placed = best.greedy_offsets

    def interrupted_ceiling(*args, **kwargs):  # Ctrl-C in the ceiling's pass (the second)
        ctrl_c_after(0.05)
        return placed(*args, **kwargs)

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # Python's: it raises
    try:
        ctrl_c_after(0.05)
        with pytest.raises(KeyboardInterrupt):
            compiled_place.compiled_offsets(units, order, "best_fit")
        assert clock.seconds() - signalled[0] < 0.1  # the pass takes ~0.9 CPU-s to its end
        monkeypatch.setattr(best, "greedy_offsets", interrupted_ceiling)
        plan = memplan.plan_with("best", problem, time_limit=60)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert plan.stats["interrupted"] and clock.seconds() - signalled[-1] < 0.5
    assert list(plan.stats["arenas"]) == ["time_sweep(placement='best_fit')"]
    assert validate(problem, plan) == []
