"""Floors above the live load (`memplan.solver.floors`): every floor is a proof.

Each relaxation on the ladder must pack at the part's exhaustive optimum
(minus the spanning buffers it took out): otherwise it could prove a floor
above the optimum. Each floor proven is at most that optimum. And on a crafted
problem whose optimum is above its live load, the floor rises to the optimum,
proven by a relaxation alone when the tight part of time is small.

The brute force here (`fits`) shares no code with the canonical search: every
offset of every buffer, in order of start.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

from memplan import Plan, Problem, lower_bound, plan_with, validate
from memplan.solver import canonical, floors
from tests.test_canonical import exhaustive_optimum, random_problem

pytestmark = pytest.mark.skipif(not canonical.available(),
                                reason="the compiled kernel is not built (no C compiler)")

# Ten buffers whose live load is 21 and whose optimum is 22 (found by a random search
# over small problems; `test_the_crafted_problem_needs_one_more_than_its_live_load`
# proves both numbers by brute force)
CRAFTED = dict(sizes=[6, 2, 8, 2, 11, 6, 4, 7, 3, 11], starts=[3, 1, 0, 2, 4, 3, 5, 1, 0, 5],
               ends=[6, 3, 3, 5, 5, 4, 8, 4, 2, 8])


def crafted(extra: int = 0, seed: int = 0) -> Problem:
    """The crafted problem, and after it ``extra`` loose buffers joined to it by a long one.

    The long buffer (size 1, steps 0..40) keeps everything one part; the loose
    buffers (steps 8..40, drawn at random, kept while their live load stays at
    most 16) leave room to spare.
    """
    sizes, starts, ends = (list(CRAFTED[k]) for k in ("sizes", "starts", "ends"))
    if extra:
        sizes, starts, ends = sizes + [1], starts + [0], ends + [40]
        rng = np.random.default_rng(seed)
        load = np.zeros(40, np.int64)
        for _ in range(extra):
            begin, size = int(rng.integers(8, 39)), int(rng.integers(1, 5))
            end = min(begin + int(rng.integers(1, 6)), 40)
            if load[begin:end].max() + size <= 16:
                load[begin:end] += size
                sizes, starts, ends = sizes + [size], starts + [begin], ends + [end]
    return Problem.from_arrays(sizes, starts, ends, name=f"crafted+{extra}")


def fits(problem: Problem, height: int) -> bool:
    """Whether some layout of ``problem`` stays under ``height`` (every offset tried)."""
    sizes, aligns = problem.sizes.tolist(), problem.alignments.tolist()
    starts, ends = problem.starts.tolist(), problem.ends.tolist()
    order = sorted(range(len(problem)), key=lambda b: (starts[b], -sizes[b]))
    offset: dict[int, int] = {}

    def place(k: int) -> bool:
        if k == len(order):
            return True
        b = order[k]
        rivals = [c for c in offset if starts[c] < ends[b] and starts[b] < ends[c]]
        for o in range(0, height - sizes[b] + 1, aligns[b]):
            if all(o + sizes[b] <= offset[c] or offset[c] + sizes[c] <= o for c in rivals):
                offset[b] = o
                if place(k + 1):
                    return True
                del offset[b]
        return False

    return place(0)


@pytest.mark.parametrize("seed", range(30))
def test_every_relaxation_packs_at_the_optimum_and_no_floor_passes_it(seed):
    problem = random_problem(500 + seed, 4 + seed % 4, aligned=seed % 3 == 0)
    optimum = exhaustive_optimum(problem)
    low = lower_bound(problem)
    for height in range(low, optimum + 1):
        for rung in floors.ladder(problem, height):
            verdict = canonical.fit(rung.problem, optimum - rung.lift, threads=1)
            assert verdict.status == "feasible", (rung.name, height)
            layout = floors.restore(problem, rung, verdict.offsets)
            assert (layout is not None) == rung.whole, rung.name
            if layout is not None:
                assert validate(problem, Plan.from_offsets(problem, layout, planner="f")) == []
    lifted = floors.raise_floor(problem, low, seconds=30)
    assert low <= lifted.floor <= optimum
    assert lifted.floor == optimum  # small problems: the whole relaxation settles
    if lifted.offsets is not None:
        plan = Plan.from_offsets(problem, lifted.offsets, planner="floors")
        assert validate(problem, plan) == []
        assert plan.arena_size >= optimum


def test_the_crafted_problem_needs_one_more_than_its_live_load():
    problem = crafted()
    assert lower_bound(problem) == 21
    assert not fits(problem, 21) and fits(problem, 22)
    lifted = floors.raise_floor(problem, 21, seconds=30)
    assert lifted.floor == 22
    plan = plan_with("exact", problem, time_limit=30)
    assert (plan.status, plan.arena_size, plan.best_bound) == ("optimal", 22, 22)
    assert validate(problem, plan) == []


def test_a_relaxation_proves_the_floor_of_a_larger_problem():
    problem = crafted(extra=60, seed=1)
    assert lower_bound(problem) == 22  # the crafted buffers (21) and the long one
    head = Problem.from_arrays(problem.sizes[:11], problem.starts[:11], problem.ends[:11])
    assert not fits(head, 22)  # so nothing fits the whole problem at 22 either
    rungs = floors.ladder(problem, 22)
    assert [r.name for r in rungs][-1] == "whole"
    lifted = floors.raise_floor(problem, 22, nodes=200_000)
    assert lifted.floor == 23
    proofs = [name for name, height, status, _ in lifted.probes if status == "infeasible"]
    assert proofs and proofs[0] != "whole"  # a relaxation, not the whole part
    plan = plan_with("exact", problem, time_limit=30)
    assert validate(problem, plan) == []
    assert plan.best_bound == 23 and plan.arena_size >= 23
    assert plan.status == ("optimal" if plan.arena_size == 23 else "feasible")


def test_a_relaxation_that_keeps_every_buffer_gives_no_layout():
    # sections {a, b}, {a, c}, {c, d}: keeping the first and the last keeps every buffer,
    # but a and c meet only in the middle one: the relaxation packs at 3, the problem not
    problem = Problem.from_arrays([2, 1, 2, 1], [0, 0, 1, 2], [2, 1, 3, 3])
    assert len(canonical.sections(problem)[2]) == 3
    rung = floors.relax(problem, np.array([0, 2]), "tight")
    assert not rung.whole and len(rung.kept) + len(rung.spanning) == len(problem)
    verdict = canonical.fit(rung.problem, 3 - rung.lift, threads=1)
    assert verdict.status == "feasible"
    assert floors.restore(problem, rung, verdict.offsets) is None
    assert canonical.fit(problem, 3, threads=1).status == "infeasible"


def test_spanning_buffers_leave_with_their_size():
    # c lives in both sections (a's and b's): it leaves the relaxation, 5 off its height
    problem = Problem.from_arrays([3, 4, 5], [0, 2, 0], [1, 3, 3])
    rung = floors.relax(problem, np.arange(len(canonical.sections(problem)[2])), "whole")
    assert rung.lift == 5 and len(rung.problem) == 2
    layout = floors.restore(problem, rung, np.zeros(2, np.int64))  # a and b never meet
    plan = Plan.from_offsets(problem, layout, planner="floors")
    assert validate(problem, plan) == [] and plan.arena_size == 9
    # with alignment 2 somewhere, an odd spanning buffer stays (moving it could misalign)
    aligned = Problem.from_arrays([3, 4, 5], [0, 2, 0], [1, 3, 3], alignments=[2, 1, 1])
    rung = floors.relax(aligned, np.arange(len(canonical.sections(aligned)[2])), "whole")
    assert rung.lift == 0 and len(rung.problem) == 3


def test_deterministic_floors_repeat_themselves_and_stop_ends_them():
    problem = crafted(extra=60, seed=1)
    first = floors.raise_floor(problem, 22, nodes=50_000)
    again = floors.raise_floor(problem, 22, nodes=50_000)
    assert (first.floor, first.probes) == (again.floor, again.probes)
    stop = threading.Event()
    stop.set()
    stopped = floors.raise_floor(problem, 22, seconds=30, stop=stop)
    assert stopped.interrupted and stopped.floor == 22 and stopped.probes == []
    one = plan_with("exact", problem, time_limit=5, deterministic=True)
    two = plan_with("exact", problem, time_limit=5, deterministic=True)
    assert one.offsets.tolist() == two.offsets.tolist() and one.best_bound == two.best_bound


def test_every_relaxation_of_minimallocs_c_packs_at_its_optimum():
    # C's optimum is its live-load bound (a layout meets it): no relaxation may prove more
    from benchmarks.floors_ladder import ladder_rows

    rows = ladder_rows("C", 20.0, 0)
    assert rows and all(row.split(" | ")[5] == "feasible" for row in rows), rows
