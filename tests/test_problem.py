"""The vocabulary: what a Problem accepts, what it refuses, and how it names the culprit."""

import numpy as np
import pytest

from memplan import Alias, Buffer, Plan, Problem, ProblemError, Region


def test_arrays_are_read_only_views_of_the_buffers():
    problem = Problem([Buffer("a", 8, 0, 2, alignment=4), Buffer("b", 4, 1, 3, offset=16)])
    assert problem.sizes.tolist() == [8, 4]
    assert problem.starts.tolist() == [0, 1] and problem.ends.tolist() == [2, 3]
    assert problem.pinned.tolist() == [-1, 16]
    with pytest.raises(ValueError):
        problem.sizes[0] = 1
    assert problem.buffer(1) == Buffer("b", 4, 1, 3, offset=16)
    assert problem.index("b") == 1 and problem.horizon == 3


@pytest.mark.parametrize("buffer, words", [
    (Buffer("x", 0, 0, 1), "size must be positive"),
    (Buffer("x", -4, 0, 1), "size must be positive"),
    (Buffer("x", 4, 3, 3), "empty lifetime"),
    (Buffer("x", 4, 3, 2), "empty lifetime"),
    (Buffer("x", 4, -1, 2), "start must be >= 0"),
    (Buffer("x", 4, 0, 1, alignment=0), "alignment must be >= 1"),
    (Buffer("x", 4, 0, 1, alignment=8, offset=4), "not a multiple of its alignment"),
    (Buffer("x", 4, 0, 1, offset=-8), "pinned offset must be >= 0"),
    (Buffer("x", 4, 0, 1, kind="weird"), "unknown kind"),
    (Buffer("x", 4, 0, 1, max_size=2), "max_size 2 is below size 4"),
    (Buffer("x", 4, 0, 1, regions=("nowhere",)), "unknown region"),
])
def test_bad_buffers_are_refused_by_name(buffer, words):
    with pytest.raises(ProblemError, match=words) as error:
        Problem([Buffer("ok", 1, 0, 1), buffer])
    assert "'x'" in str(error.value) and error.value.buffer == "x"


def test_duplicate_ids_and_unknown_references():
    with pytest.raises(ProblemError, match="'a'.*duplicate id"):
        Problem([Buffer("a", 1, 0, 1), Buffer("a", 2, 0, 1)])
    two = [Buffer("a", 1, 0, 1), Buffer("b", 1, 0, 1)]
    with pytest.raises(ProblemError, match="alias target names unknown buffer 'zz'"):
        Problem(two, aliases=[Alias("a", "zz")])
    with pytest.raises(ProblemError, match="conflict names unknown buffer 'q'"):
        Problem(two, conflicts=[("a", "q")])
    with pytest.raises(ProblemError, match="conflicts with itself"):
        Problem(two, conflicts=[("a", "a")])
    with pytest.raises(ProblemError, match="capacity must be positive"):
        Problem(two, capacity=0)


def test_alias_cycle_with_contradicting_deltas_is_refused():
    buffers = [Buffer(x, 8, 0, 2) for x in "abc"]
    consistent = [Alias("a", "b", 4), Alias("b", "c", 4), Alias("a", "c", 8)]
    root, delta = Problem(buffers, aliases=consistent).alias_groups
    assert len(set(root.tolist())) == 1
    assert (delta - delta[0]).tolist() == [0, 4, 8]
    with pytest.raises(ProblemError, match="alias cycle contradicts itself"):
        Problem(buffers, aliases=[Alias("a", "b", 4), Alias("b", "c", 4), Alias("a", "c", 4)])
    # an optional alias may contradict: the planner simply cannot take it
    Problem(buffers, aliases=[*consistent[:2], Alias("a", "c", 4, optional=True)])


def test_pins_and_alignments_that_aliases_make_impossible():
    with pytest.raises(ProblemError, match="contradicts the pinned offset of 'a'"):
        Problem([Buffer("a", 8, 0, 2, offset=0), Buffer("b", 8, 0, 2, offset=0)],
                aliases=[Alias("a", "b", 4)])
    with pytest.raises(ProblemError, match="can never align"):
        Problem([Buffer("a", 8, 0, 2, alignment=8), Buffer("b", 8, 0, 2, alignment=8)],
                aliases=[Alias("a", "b", 4)])


def test_from_conflicts_gives_every_buffer_its_own_step():
    problem = Problem.from_conflicts({"a": 5, "b": 10}, [("a", "b")])
    assert problem.starts.tolist() == [0, 1] and problem.ends.tolist() == [1, 2]
    assert problem.conflicts.tolist() == [[0, 1]]


def test_from_arrays_builds_large_problems_without_buffer_objects():
    n = 100_000
    rng = np.random.default_rng(0)
    starts = rng.integers(0, 1000, n)
    problem = Problem.from_arrays(rng.integers(1, 1 << 20, n), starts, starts + 5)
    assert len(problem) == n and problem.ids[5] == "5"


def test_plan_status_follows_bound_and_capacity():
    problem = Problem([Buffer("a", 4, 0, 2), Buffer("b", 4, 1, 3)], capacity=8)
    assert Plan.from_offsets(problem, [0, 4], planner="t").status == "optimal"
    loose = Plan.from_offsets(problem, [0, 8], planner="t")
    assert loose.status == "infeasible" and loose.arena_size == 12
    wide = Plan.from_offsets(problem.replace(capacity=None), [0, 8], planner="t")
    assert wide.status == "feasible" and wide.gap == pytest.approx(4 / 12)


def test_replace_keeps_every_field():
    problem = Problem([Buffer("a", 4, 0, 2, regions=("fast",)), Buffer("b", 4, 1, 3),
                       Buffer("c", 4, 2, 3)],
                      aliases=[Alias("a", "b", 0, optional=True)], conflicts=[("a", "c")],
                      regions=[Region("fast", 64, 0.0), Region("slow")], capacity=99,
                      widths=[4, 8, 4], name="p")
    copy = problem.replace(capacity=None)
    assert copy.capacity is None
    assert list(copy.buffers) == list(problem.buffers)
    assert copy.aliases == problem.aliases and copy.regions == problem.regions
    assert copy.conflicts.tolist() == [[0, 2]] and copy.widths.tolist() == [4, 8, 4]


def test_the_compiled_union_find_gives_the_python_loops_groups():
    """Random alias graphs, contradictions included: the same roots, differences and
    contradicting edges from the C kernel as from `union_find`'s Python loop."""
    from memplan.problem import _compiled_union_find, union_find

    rng = np.random.default_rng(7)
    for trial in range(40):
        n, e = int(rng.integers(1, 60)), int(rng.integers(0, 120))
        a, b = rng.integers(0, n, e), rng.integers(0, n, e)
        d = rng.integers(-3, 4, e) * (trial % 2)  # odd trials: differences, contradictions
        compiled = _compiled_union_find(n, a, b, d)
        assert compiled is not None  # the test extra builds the kernels
        looped = union_find(n, zip(a.tolist(), b.tolist(), d.tolist(), strict=True))
        assert [part.tolist() for part in compiled] == [list(part) for part in looped]


def test_the_compiled_union_find_leaves_differences_past_int64_to_python():
    from memplan.problem import _compiled_union_find, union_find

    big = np.int64(2**62)
    a, b, d = np.array([0, 1, 2]), np.array([1, 2, 3]), np.array([big, big, big])
    assert _compiled_union_find(4, a, b, d) is None
    root, to_root, _ = union_find(4, zip(a.tolist(), b.tolist(), d.tolist(), strict=True))
    assert root == [0] * 4 and to_root[3] == 3 * 2**62


def test_alias_groups_are_the_same_without_the_compiled_kernel(monkeypatch):
    import memplan.problem as vocabulary

    rng = np.random.default_rng(11)
    buffers = [Buffer(f"b{i}", 8, 0, 4) for i in range(30)]
    aliases = [Alias(f"b{a}", f"b{b}", int(d)) for a, b, d in
               zip(rng.integers(0, 30, 25), rng.integers(0, 30, 25), rng.integers(0, 3, 25) * 8,
                   strict=True) if a != b]
    problem = Problem(buffers, aliases=[Alias(a.src, a.dst, a.delta, optional=True)
                                        for a in aliases])
    order = np.arange(len(aliases))[::-1]
    compiled = vocabulary.alias_components(problem, order)
    monkeypatch.setattr(vocabulary, "_union_find_kernel", None)
    looped = vocabulary.alias_components(problem, order)
    assert [part.tolist() for part in compiled] == [part.tolist() for part in looped]
