"""Lower bounds: the live-load profile, aliases counted once, conflict cliques."""

import random

import pytest

from memplan import Alias, Buffer, Problem
from memplan.bounds import _alias_components, clique_bound, live_bytes, load_profile, lower_bound
from memplan.errors import ProblemError
from memplan.formats import minimalloc_csv

PUBLISHED = {"A": 1048576, "B": 1048576, "C": 1039360, "D": 986112, "E": 1048576,
             "F": 1048576, "G": 1048576, "H": 1048576, "I": 1048576, "J": 989184,
             "K": 1048576}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_challenging_lower_bounds_match_the_published_ones(challenging, name):
    problem = minimalloc_csv.read_problem(challenging / f"{name}.1048576.csv")
    assert lower_bound(problem) == PUBLISHED[name]


def test_profile_is_a_step_function_with_half_open_lifetimes():
    problem = Problem([Buffer("a", 4, 0, 3), Buffer("b", 2, 3, 5), Buffer("c", 1, 1, 4)])
    times, loads = load_profile(problem)
    assert times.tolist() == [0, 1, 3, 4, 5]
    assert loads.tolist() == [4, 5, 3, 2, 0]
    assert live_bytes(problem).tolist() == [4, 5, 5, 3, 2]
    assert lower_bound(problem) == 5


def test_aliased_buffers_count_once():
    views = Problem([Buffer("x", 8, 0, 3), Buffer("v", 8, 1, 4), Buffer("w", 4, 2, 5)],
                    aliases=[Alias("x", "v"), Alias("v", "w", 2)])
    #  x [0,8) t0-2, v [0,8) t1-3, w [2,6) t2-4: the union is 8 bytes at most
    assert load_profile(views)[1].max() == 8
    inplace = Problem([Buffer("x", 8, 0, 2), Buffer("y", 8, 1, 3)],
                      aliases=[Alias("x", "y", optional=True)])
    assert lower_bound(inplace) == 8  # if the planner takes the alias, 8 bytes suffice
    contradicting = Problem([Buffer("a", 8, 0, 2), Buffer("b", 8, 1, 3)],
                            aliases=[Alias("a", "b", 0, optional=True),
                                     Alias("a", "b", 8, optional=True)])
    assert lower_bound(contradicting) == 8  # either could be taken: stay valid


def test_clique_bound_on_a_conflict_graph():
    sizes = {"1": 5, "2": 10, "3": 8, "4": 20, "5": 2, "6": 6, "7": 15, "8": 3}
    pairs = [(a, b) for a, b in ("12 23 24 25 34 35 36 45 46 47 56 57 58 67 78".split())]
    problem = Problem.from_conflicts(sizes, pairs)
    # {4, 5, 6, 7} pairwise conflict: 20 + 2 + 6 + 15 = 43
    assert clique_bound(problem) == 43 == lower_bound(problem)


def _bytes_live(problem, t):
    """Brute force: the bytes live at step t, each alias group's members on one set of
    bytes (relative to the group), counted once."""
    root, delta, _ = _alias_components(problem)
    used = set()
    for i in range(len(problem)):
        if problem.starts[i] <= t < problem.ends[i]:
            used.update((int(root[i]), int(delta[i]) + k) for k in range(int(problem.sizes[i])))
    return len(used)


@pytest.mark.parametrize("seed", range(8))
def test_grouped_profile_equals_a_byte_by_byte_count(seed):
    rng, checked = random.Random(seed), 0
    while checked < 60:
        count = rng.randint(2, 9)
        buffers = []
        for i in range(count):
            start = rng.randint(0, 6)
            buffers.append(Buffer(f"b{i}", rng.randint(1, 9), start, start + rng.randint(1, 5)))
        aliases = [Alias(f"b{a}", f"b{b}", rng.randint(-6, 6), optional=rng.random() < 0.3)
                   for a, b in (rng.sample(range(count), 2) for _ in range(rng.randint(1, 6)))]
        try:
            problem = Problem(buffers, aliases=aliases)
        except ProblemError:
            continue
        if len(_alias_components(problem)[2]):
            continue  # contradicting optional aliases: counted cautiously, tested above
        checked += 1
        assert live_bytes(problem).tolist() == [_bytes_live(problem, t)
                                                 for t in range(problem.horizon)]

