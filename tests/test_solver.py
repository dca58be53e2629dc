"""The exact planner: optimal on small problems (checked by exhaustive search), exact aliases,
capacities, statuses, progress and stopping.

Every plan goes through the independent validator. The exhaustive search below
shares no code with the planner: it tries every aligned offset of every buffer
(mandatory aliases fix a target from its source), prunes only pairs that can
never share memory, and asks the validator about every complete layout.
"""

from __future__ import annotations

import itertools
import threading

import numpy as np
import pytest

from memplan import Alias, Buffer, Problem, ProblemError, lower_bound, plan_with, validate
from memplan.solver import Progress

FAST = {"time_limit": 10.0, "threads": 2}


def exact(problem: Problem, **options):
    plan = plan_with("exact", problem, **{**FAST, **options})
    violations = validate(problem, plan)
    if plan.status == "infeasible":
        violations = [v for v in violations if v.kind != "capacity"]
    assert violations == [], violations[:3]
    assert plan.arena_size >= plan.lower_bound == lower_bound(problem)
    return plan


# --------------------------------------------------------------- exhaustive search
def exhaustive_optimum(problem: Problem) -> int:
    """The smallest arena of any valid plan, by trying every offset (tiny problems only)."""
    n = len(problem)
    sizes, aligns = problem.sizes.tolist(), problem.alignments.tolist()
    starts, ends = problem.starts.tolist(), problem.ends.tolist()
    linked = list(range(n))  # any alias, taken or not: only linked buffers may share memory

    def find(i):
        while linked[i] != i:
            i = linked[i]
        return i

    for a in problem.aliases:
        linked[find(problem.index(a.src))] = find(problem.index(a.dst))
    explicit = {frozenset(pair) for pair in problem.conflicts.tolist()}
    clash = [[i != j and find(i) != find(j) and (
        (starts[i] < ends[j] and starts[j] < ends[i]) or frozenset((i, j)) in explicit)
        for j in range(n)] for i in range(n)]
    fixed = {problem.index(a.dst): (problem.index(a.src), a.delta)
             for a in problem.aliases if not a.optional}
    order = sorted(range(n), key=lambda i: i in fixed)  # free buffers first
    pinned_top = max((problem.pinned + problem.sizes)[problem.pinned >= 0], default=0)
    best = [int(sum(sizes) + sum(aligns) + pinned_top) + 1]
    offsets = [0] * n

    def place(k, top):
        if top >= best[0]:
            return
        if k == n:
            if not validate(problem, dict(zip(problem.ids, offsets, strict=True))):
                best[0] = top
            return
        i = order[k]
        if problem.pinned[i] >= 0:
            choices = [int(problem.pinned[i])]
        elif i in fixed and fixed[i][0] in order[:k]:
            choices = [offsets[fixed[i][0]] + fixed[i][1]]
        else:
            choices = range(0, best[0] - sizes[i], aligns[i])
        for offset in choices:
            if offset < 0 or offset + sizes[i] >= best[0]:
                continue
            if any(clash[i][j] and offset < offsets[j] + sizes[j] and offsets[j] < offset + sizes[i]
                   for j in order[:k]):
                continue
            offsets[i] = offset
            place(k + 1, max(top, offset + sizes[i]))

    place(0, 0)
    return best[0]


def random_problem(seed: int, scale: int = 1, aliases: int = 2) -> Problem:
    """Up to 7 buffers with aliases, alignment, explicit conflicts; sizes times ``scale``.

    ``aliases`` more than 2 gives fewer buffers with more (mostly optional) aliases.
    """
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 8)) if aliases <= 2 else int(rng.integers(4, 7))
    buffers = []
    for i in range(n):
        start = int(rng.integers(0, 6))
        align = int(rng.choice([1, 1, 2]))
        buffers.append(Buffer(f"b{i}", int(rng.integers(1, 4)) * align * scale, start,
                              start + int(rng.integers(1, 4)), alignment=align * scale))
    links = []
    for _ in range(int(rng.integers(0, aliases + 1))):
        src, dst = (int(x) for x in rng.choice(n, 2, replace=False))
        delta = int(rng.integers(0, 2)) * buffers[src].alignment
        optional = bool(rng.random() < (0.5 if aliases <= 2 else 0.8))
        links.append(Alias(f"b{src}", f"b{dst}", delta, optional=optional))
    conflicts = [(f"b{a}", f"b{b}") for a, b in itertools.combinations(range(n), 2)
                 if rng.random() < 0.15]
    return Problem(buffers, aliases=links, conflicts=conflicts, name=f"random{seed}")


def small_problems(count: int, aliases: int = 2):
    found, seed = [], 0
    while len(found) < count:
        try:
            found.append((seed, random_problem(seed, aliases=aliases)))
        except ProblemError:  # contradicting aliases: not a problem
            pass
        seed += 1
    return found


@pytest.mark.parametrize("seed,problem", small_problems(40), ids=lambda x: str(x)
                         if isinstance(x, int) else "")
def test_peak_equals_exhaustive_optimum(seed, problem):
    optimum = exhaustive_optimum(problem)
    cold = exact(problem, warm_start=None)
    assert (cold.arena_size, cold.status) == (optimum, "optimal")
    assert cold.best_bound == optimum
    warm = exact(problem)
    assert warm.arena_size == optimum
    scaled = exact(random_problem(seed, scale=8), warm_start=None)  # exercises the divisor
    assert scaled.arena_size == 8 * optimum


@pytest.mark.parametrize("seed,problem", small_problems(30, aliases=5),
                         ids=lambda x: str(x) if isinstance(x, int) else "")
def test_peak_equals_exhaustive_optimum_with_many_optional_aliases(seed, problem):
    plan = exact(problem, warm_start=None)
    assert (plan.arena_size, plan.status) == (exhaustive_optimum(problem), "optimal")


# ------------------------------------------------------------------------ aliases
def in_place(delta: int, *, optional: bool) -> Problem:
    return Problem([Buffer("x", 4, 0, 2), Buffer("y", 4, 1, 3), Buffer("z", 4, 0, 3)],
                   aliases=[Alias("x", "y", delta, optional=optional)])


def test_optional_alias_is_taken_when_it_lowers_the_peak():
    problem = in_place(0, optional=True)
    plan = exact(problem, warm_start=None)
    assert plan.arena_size == 8 and plan.status == "optimal"
    assert plan.offset_of(problem, "x") == plan.offset_of(problem, "y")


def test_optional_alias_is_left_when_it_would_raise_the_peak():
    problem = Problem([Buffer("a", 2, 0, 2), Buffer("b", 2, 2, 4), Buffer("c", 2, 0, 4)],
                      aliases=[Alias("a", "b", 2, optional=True)])
    plan = exact(problem, warm_start=None)
    assert plan.arena_size == 4 and plan.status == "optimal"
    assert plan.offset_of(problem, "b") != plan.offset_of(problem, "a") + 2


def test_in_place_output_larger_than_its_input_shares_the_handover_step():
    problem = Problem([Buffer("x", 4, 0, 2), Buffer("y", 6, 1, 3), Buffer("w", 2, 0, 1)],
                      aliases=[Alias("x", "y", 0)])
    plan = exact(problem, warm_start=None)
    assert plan.arena_size == 6  # w [0,1) sits above x; y covers x's bytes from step 1


def test_views_and_concat_slices_share_exactly_as_their_aliases_say():
    problem = Problem(
        [Buffer("a", 4, 0, 3), Buffer("b", 4, 1, 3), Buffer("cat", 8, 2, 4),
         Buffer("view", 8, 3, 5), Buffer("other", 4, 0, 5)],
        aliases=[Alias("cat", "a", 0), Alias("cat", "b", 4), Alias("cat", "view", 0)])
    plan = exact(problem, warm_start=None)
    assert plan.arena_size == 12 and plan.status == "optimal"
    cat = plan.offset_of(problem, "cat")
    assert plan.offset_of(problem, "b") == cat + 4 and plan.offset_of(problem, "view") == cat


def test_chain_of_optional_in_place_aliases_is_taken_end_to_end():
    buffers = [Buffer(f"t{i}", 8, i, i + 2) for i in range(5)]
    aliases = [Alias(f"t{i}", f"t{i + 1}", 0, optional=True) for i in range(4)]
    problem = Problem(buffers + [Buffer("side", 3, 0, 6)], aliases=aliases)
    plan = exact(problem, warm_start=None)
    assert plan.arena_size == 11 and len(set(plan.offsets[:5].tolist())) == 1


# ---------------------------------------------------------- capacity and statuses
def fragmenting() -> Problem:
    """Alignment leaves a hole: live load 8, but no layout fits in 8.

    ``a`` and ``b`` (3 bytes, 4-aligned) live together at step 1, so one of
    them starts at 4 or higher; ``c`` (2 bytes, all along) fits in no hole.
    """
    problem = Problem([Buffer("a", 3, 0, 2, alignment=4), Buffer("b", 3, 1, 3, alignment=4),
                       Buffer("c", 2, 0, 3)])
    optimum = exhaustive_optimum(problem)
    assert optimum > lower_bound(problem) == 8
    return problem.replace(capacity=optimum - 1)


def test_impossible_capacity_is_proven_infeasible():
    problem = fragmenting()
    for warm_start in ("best", None):
        plan = exact(problem, warm_start=warm_start)
        assert plan.status == "infeasible" and plan.best_bound > problem.capacity


def test_capacity_below_the_lower_bound_is_infeasible_at_once():
    problem = Problem([Buffer("a", 8, 0, 2), Buffer("b", 8, 1, 3)], capacity=12)
    plan = exact(problem)
    assert plan.status == "infeasible" and plan.best_bound == 16


def test_a_capacity_that_fits_gives_a_fitting_plan():
    problem = fragmenting().replace(capacity=None)
    optimum = exhaustive_optimum(problem)
    plan = exact(problem.replace(capacity=optimum), warm_start=None)
    assert plan.status in ("optimal", "feasible") and plan.arena_size <= optimum


def test_conflict_graph_of_the_issue_is_solved_to_its_proven_optimum():
    sizes = {"1": 5, "2": 10, "3": 8, "4": 20, "5": 2, "6": 6, "7": 15, "8": 3}
    pairs = "12 23 24 25 34 35 36 45 46 47 56 57 58 67 78".split()
    problem = Problem.from_conflicts({k: v << 20 for k, v in sizes.items()},
                                     [tuple(p) for p in pairs])
    plan = exact(problem, warm_start=None)
    assert plan.status == "optimal" and plan.arena_size == 43 << 20  # 4, 5, 6, 7: a clique
    assert exhaustive_optimum(Problem.from_conflicts(sizes, [tuple(p) for p in pairs])) == 43


# ---------------------------------------------------------- options and reporting
def test_progress_reports_plans_and_bounds_and_stop_keeps_the_best_plan():
    buffers = [Buffer(f"t{i}", 1 + (7 * i) % 11, i % 9, i % 9 + 1 + i % 4) for i in range(40)]
    problem = Problem(buffers)
    seen: list[Progress] = []
    stop = threading.Event()

    def on_progress(progress: Progress):
        seen.append(progress)
        if progress.arena_size is not None:  # the first plan: stop there
            stop.set()

    plan = exact(problem, warm_start=None, on_progress=on_progress, stop=stop)
    assert seen[0].arena_size is None and seen[0].best_bound == plan.lower_bound
    assert all(p.best_bound <= plan.arena_size for p in seen)
    assert plan.status in ("optimal", "feasible")


def test_deterministic_mode_repeats_itself():
    problem = random_problem(3)
    first = exact(problem, warm_start=None, deterministic=True)
    second = exact(problem, warm_start=None, deterministic=True)
    assert first.offsets.tolist() == second.offsets.tolist()


def test_unknown_option_names_the_valid_ones():
    with pytest.raises(TypeError, match="valid: .*time_limit"):
        plan_with("exact", random_problem(3), colour="red")


def test_search_settings_all_give_the_optimum():
    problem = fragmenting().replace(capacity=None)
    optimum = exhaustive_optimum(problem)
    for options in ({"strategy": "none"}, {"orders": ("total", "area", "size")},
                    {"sections": False, "timetabling": True, "energetic": True}):
        assert exact(problem, warm_start=None, **options).arena_size == optimum


_CTRL_C_SCRIPT = """
import json, os, signal, sys, threading, time
from memplan import plan_with
from memplan.formats import minimalloc_csv

problem = minimalloc_csv.read_problem(sys.argv[1]).replace(capacity=None)
timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))

def on_progress(progress):  # the search runs: press Ctrl-C half a second later
    if not timer.is_alive() and not timer.finished.is_set():
        timer.start()

began = time.perf_counter()
plan = plan_with("exact", problem, time_limit=60.0, on_progress=on_progress)
print(json.dumps({"seconds": time.perf_counter() - began, "status": plan.status,
                  "interrupted": plan.stats["interrupted"]}))
"""


def test_ctrl_c_stops_the_search_and_keeps_the_best_plan(challenging):
    """A SIGINT during the search ends it at once; the plan comes back, not the exception.

    In a child process of its own: a SIGINT must not reach the test runner's workers.
    MiniMalloc's D: its minimisation runs the whole minute (I packs at its floor at once).
    """
    import json
    import subprocess
    import sys

    child = subprocess.run([sys.executable, "-c", _CTRL_C_SCRIPT,
                            str(challenging / "D.1048576.csv")],
                           capture_output=True, text=True, timeout=120)
    assert child.returncode == 0, child.stderr[-2000:]
    outcome = json.loads(child.stdout.strip().splitlines()[-1])
    assert outcome["seconds"] < 30.0
    assert outcome["interrupted"] and outcome["status"] == "feasible"
