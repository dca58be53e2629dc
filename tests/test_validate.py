"""The independent validator: one test per kind of violation, and agreement with brute force."""

import importlib

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from memplan import Alias, Buffer, Plan, Problem, ProblemError, Region, validate
from memplan.formats import minimalloc_csv


def kinds(problem, plan):
    """The (kind, buffers) of every violation; ``plan`` may be a list of offsets."""
    if isinstance(plan, list):
        plan = dict(zip(problem.ids, plan, strict=True))
    return sorted((v.kind, v.buffers) for v in validate(problem, plan))


def plan_of(problem, offsets, regions=None, sizes=None, **fields):
    plan = Plan.from_offsets(problem, offsets, planner="hand", regions=regions, sizes=sizes)
    for key, value in fields.items():
        setattr(plan, key, value)
    return plan


def test_accepts_minimalloc_example_with_a_hand_made_solution(challenging):
    problem = minimalloc_csv.read_problem(challenging / "example.12.csv")
    #  12 +---------------------------+
    #   8 |            b5             |
    #   4 |    b3      |     b4       |      b1 [0,3)  b2 [3,9)  b3 [0,9)
    #   0 | b1 |  b2   |              |      b4 [9,21) b5 [0,21)
    #     0    3       9             21
    plan = plan_of(problem, [0, 0, 4, 4, 8])
    assert validate(problem, plan) == [] and plan.arena_size == 12 == problem.capacity


def test_overlap_of_live_buffers_names_both():
    problem = Problem([Buffer("a", 4, 0, 3), Buffer("b", 4, 2, 5), Buffer("c", 4, 3, 5)])
    assert kinds(problem, [0, 2, 0]) == [("overlap", ("a", "b")), ("overlap", ("b", "c"))]
    assert kinds(problem, [0, 4, 0]) == []  # a ends at 3 where c starts: half-open


def test_explicit_conflict_beyond_lifetimes():
    problem = Problem([Buffer("a", 4, 0, 1), Buffer("b", 4, 5, 6)], conflicts=[("a", "b")])
    assert kinds(problem, [0, 0]) == [("conflict", ("a", "b"))]
    assert kinds(problem, [0, 4]) == []


def test_misaligned_negative_and_pinned():
    problem = Problem([Buffer("a", 4, 0, 1, alignment=8), Buffer("b", 4, 0, 1, offset=16),
                       Buffer("c", 4, 0, 1)])
    assert kinds(problem, [4, 8, -4]) == [("misaligned", ("a",)), ("negative", ("c",)),
                                          ("pinned", ("b",))]


def test_alias_must_be_honoured_and_lets_buffers_share_bytes():
    buffers = [Buffer("x", 8, 0, 2), Buffer("view", 8, 1, 4), Buffer("y", 8, 1, 3)]
    problem = Problem(buffers, aliases=[Alias("x", "view", 0)])
    assert kinds(problem, [0, 0, 8]) == []
    assert ("alias", ("x", "view")) in kinds(problem, [0, 8, 16])
    # y overlaps x and view but is no alias of theirs
    assert kinds(problem, [0, 0, 4]) == [("overlap", ("view", "y")), ("overlap", ("x", "y"))]


def test_optional_alias_taken_or_not():
    buffers = [Buffer("x", 8, 0, 2), Buffer("y", 8, 1, 3)]  # in-place: y over dying x
    problem = Problem(buffers, aliases=[Alias("x", "y", 0, optional=True)])
    assert kinds(problem, [0, 0]) == []  # taken
    assert kinds(problem, [0, 8]) == []  # left
    assert kinds(problem, [0, 4]) == [("overlap", ("x", "y"))]  # neither


def test_concat_slices_share_the_output():
    buffers = [Buffer("a", 4, 0, 3), Buffer("b", 4, 1, 3), Buffer("cat", 8, 2, 5)]
    problem = Problem(buffers, aliases=[Alias("cat", "a", 0), Alias("cat", "b", 4)])
    assert kinds(problem, [0, 4, 0]) == []
    assert ("alias", ("cat", "b")) in kinds(problem, [0, 8, 0])


def test_capacity_and_region_capacity():
    problem = Problem([Buffer("a", 8, 0, 1), Buffer("b", 8, 0, 1)], capacity=12)
    assert kinds(problem, [0, 8]) == [("capacity", ("b",))]
    regional = Problem([Buffer("a", 8, 0, 1, regions=("sram",)), Buffer("b", 8, 0, 1)],
                       regions=[Region("sram", 8), Region("dram")])
    assert kinds(regional, plan_of(regional, [0, 0], regions=np.array([0, 1]))) == []
    assert kinds(regional, plan_of(regional, [0, 8], regions=np.array([0, 0]))) == [
        ("capacity", ("b",))]
    assert kinds(regional, plan_of(regional, [0, 0], regions=np.array([1, 0]))) == [
        ("region", ("a",))]


def test_missing_extra_buffers_and_wrong_arena():
    problem = Problem([Buffer("a", 4, 0, 1), Buffer("b", 4, 0, 1)])
    assert kinds(problem, {"a": 0, "zz": 4}) == [("extra", ("zz",)), ("missing", ("b",))]
    assert kinds(problem, plan_of(problem, [0, 4], arena_size=4)) == [("arena", ())]
    assert [v.kind for v in validate(problem, plan_of(problem, [0]))] == ["missing"]


def test_granted_scratch_sizes_are_checked():
    problem = Problem([Buffer("s", 4, 0, 1, kind="scratch", max_size=16), Buffer("a", 8, 0, 1)])
    assert kinds(problem, plan_of(problem, [8, 0], sizes=np.array([16, 8]))) == []
    assert kinds(problem, plan_of(problem, [8, 0], sizes=np.array([32, 8]))) == [
        ("size", ("s",))]


def test_checks_100k_buffers_quickly():
    n = 100_000
    starts = np.arange(n) // 4
    sizes = np.full(n, 64)
    problem = Problem.from_arrays(sizes, starts, starts + 2)
    offsets = (np.arange(n) % 8) * 64  # 8 live at once at most, 8 slots
    assert validate(problem, Plan.from_offsets(problem, offsets, planner="hand")) == []


def brute_force(problem, offsets):
    """All pairs: the (sorted) pairs of buffers that conflict and share bytes."""
    n = len(problem)
    root = list(range(n))

    def find(i):
        while root[i] != i:
            i = root[i]
        return i

    links = set()  # an honoured optional alias lets its two sides' pieces share, no chain
    for alias in problem.aliases:
        s, d = problem.index(alias.src), problem.index(alias.dst)
        if offsets[d] == offsets[s] + alias.delta and not alias.optional:
            root[find(s)] = find(d)
    for alias in problem.aliases:
        s, d = problem.index(alias.src), problem.index(alias.dst)
        if offsets[d] == offsets[s] + alias.delta and alias.optional:
            links.add(frozenset((find(s), find(d))))
    explicit = {tuple(sorted(p)) for p in problem.conflicts.tolist()}
    pairs = set()
    for i in range(n):
        for j in range(i + 1, n):
            live = problem.starts[i] < problem.ends[j] and problem.starts[j] < problem.ends[i]
            shared = find(i) == find(j) or frozenset((find(i), find(j))) in links
            if not ((i, j) in explicit or (live and not shared)):  # conflicts always hold
                continue
            if offsets[i] < offsets[j] + problem.sizes[j] and \
                    offsets[j] < offsets[i] + problem.sizes[i]:
                pairs.add((i, j))
    return pairs


@st.composite
def problems_and_offsets(draw):
    n = draw(st.integers(1, 12))
    buffers = []
    for i in range(n):
        start = draw(st.integers(0, 8))
        buffers.append(Buffer(str(i), draw(st.integers(1, 6)), start,
                              start + draw(st.integers(1, 5))))
    ids = [b.id for b in buffers]
    conflicts = draw(st.lists(st.tuples(st.sampled_from(ids), st.sampled_from(ids))
                              .filter(lambda p: p[0] != p[1]), max_size=4))
    aliases = []
    if n > 1:
        for _ in range(draw(st.integers(0, 2))):
            src, dst = draw(st.sampled_from(ids)), draw(st.sampled_from(ids))
            if src != dst:
                aliases.append(Alias(src, dst, draw(st.integers(0, 3)), optional=True))
    try:  # a conflict inside an alias chain, or a chain whose ends meet: refused
        problem = Problem(buffers, aliases=aliases, conflicts=conflicts)
    except ProblemError:
        assume(False)
    offsets = draw(st.lists(st.integers(0, 12), min_size=n, max_size=n))
    return problem, offsets


def routes(pair_check, chunk, compiled=True):
    """Set the validator's route: ``pair_check`` -1 = the sweep only; ``chunk``: pairs at once;
    ``compiled``: the compiled sweep's verdict first (False: the Python sweep alone)."""
    checker = importlib.import_module("memplan.validate")  # memplan.validate: the function
    before = checker.PAIR_CHECK, checker.PAIR_CHUNK, checker._compiled_any_overlap
    checker.PAIR_CHECK, checker.PAIR_CHUNK = pair_check, chunk
    if compiled is not True:
        checker._compiled_any_overlap = compiled or None
    return before


@settings(max_examples=300, deadline=None)
@given(problems_and_offsets(), st.sampled_from([(-1, 1 << 21), (1 << 30, 1 << 21),
                                                (1 << 30, 2), (-1, 1 << 21, False)]))
def test_sweep_and_pair_lists_agree_with_all_pairs(case, route):
    """The sweep alone (the compiled verdict first, or Python's alone), and the numpy pair
    lists first (in one chunk, or in chunks of two pairs), find exactly the overlaps that
    all pairs do."""
    problem, offsets = case
    plan = dict(zip(problem.ids, offsets, strict=True))
    before = routes(*route)
    try:
        found = {tuple(sorted(problem.index(id) for id in v.buffers))
                 for v in validate(problem, plan) if v.kind in ("overlap", "conflict")}
    finally:
        routes(*before[:2], before[2] or False)
    assert found == brute_force(problem, np.array(offsets))


@settings(max_examples=300, deadline=None)
@given(problems_and_offsets(), st.booleans())
def test_the_compiled_sweep_finds_a_fault_exactly_when_the_python_sweep_does(case, mandatory):
    """The compiled sweep's verdict against the Python sweep's list (itself held to all
    pairs above), aliases optional or mandatory (then a buffer and its views share bytes on
    purpose)."""
    checker = importlib.import_module("memplan.validate")
    assert checker._compiled_any_overlap is not None  # the extension is built for the tests
    problem, offsets = case
    if mandatory:
        try:
            problem = problem.replace(aliases=[Alias(a.src, a.dst, a.delta)
                                               for a in problem.aliases])
        except ProblemError:
            assume(False)
    offsets, members = np.array(offsets, np.int64), np.arange(len(problem))
    sharing = checker._sharing(problem, offsets)
    listed = []
    checker._overlaps(problem, offsets, problem.sizes, members, sharing, listed, 100)
    assert checker._any_overlap_compiled(problem, offsets, problem.sizes, members,
                                         sharing) == bool(listed)


def test_pair_lists_prove_large_valid_plans_and_leave_faults_to_the_sweep():
    """Long lifetimes (many time pairs, few address pairs): the numpy route proves the
    plan; one buffer moved onto another: reported by the sweep, naming both."""
    checker = importlib.import_module("memplan.validate")
    n = 3000
    starts = np.arange(n) % 50
    sizes = np.full(n, 64)
    problem = Problem.from_arrays(sizes, starts, starts + 60)  # ~2000 live at once
    offsets = np.arange(n) * 64
    sharing = checker._sharing(problem, offsets)
    members = np.arange(n)
    assert checker._no_overlap_by_pairs(problem, offsets, sizes, members, sharing)
    assert validate(problem, Plan.from_offsets(problem, offsets, planner="hand")) == []
    offsets[7] = offsets[9]  # 7 and 9 live together during [9, 67)
    sharing = checker._sharing(problem, offsets)
    assert not checker._no_overlap_by_pairs(problem, offsets, sizes, members, sharing)
    found = validate(problem, Plan.from_offsets(problem, offsets, planner="hand"))
    assert [(v.kind, sorted(v.buffers)) for v in found] == [
        ("overlap", sorted([problem.ids[7], problem.ids[9]]))]


@pytest.mark.parametrize("seed", range(6))
def test_the_compiled_sweep_agrees_with_python_with_thousands_live(seed):
    """Thousands of buffers live at once, so the compiled sweep's tree of live buffers
    inserts, removes and walks far from its ends: a fault planted at a random buffer is
    found exactly when the Python sweep finds one, and a valid plan passes."""
    checker = importlib.import_module("memplan.validate")
    rng = np.random.default_rng(seed)
    n = 3000
    starts = rng.integers(0, 200, n)
    problem = Problem.from_arrays(rng.integers(1, 64, n), starts, starts + rng.integers(1, 150, n))
    offsets = np.cumsum(np.r_[0, problem.sizes[:-1]]).astype(np.int64)  # disjoint
    members = np.arange(n)
    for planted in (False, True):
        if planted:
            a, b = rng.choice(n, 2, replace=False)
            offsets[a] = offsets[b] + int(rng.integers(0, problem.sizes[b]))
        sharing = checker._sharing(problem, offsets)
        listed = []
        checker._overlaps(problem, offsets, problem.sizes, members, sharing, listed, 100)
        assert checker._any_overlap_compiled(problem, offsets, problem.sizes, members,
                                             sharing) == bool(listed)
        tops = offsets + problem.sizes
        clash = ((problem.starts < problem.ends[a]) & (problem.starts[a] < problem.ends)
                 & (offsets < tops[a]) & (offsets[a] < tops)) if planted else np.zeros(n, bool)
        assert bool(listed) == (clash.sum() > 1)  # a clashes with itself


def test_the_validators_alias_components_are_the_union_finds_partition():
    """`_components` (numpy rounds) groups items as `memplan.problem.union_find` does, each
    labelled by its group's smallest item, on random graphs and on a long chain."""
    from memplan.problem import union_find
    from memplan.validate import _components

    rng = np.random.default_rng(3)
    graphs = [(5000, np.arange(4999)[::-1], np.arange(1, 5000)[::-1])]  # a chain, backwards
    for _ in range(100):
        n, e = int(rng.integers(1, 80)), int(rng.integers(0, 150))
        graphs.append((n, rng.integers(0, n, e), rng.integers(0, n, e)))
    for n, a, b in graphs:
        label = _components(n, a, b).tolist()
        root, _, _ = union_find(n, zip(a.tolist(), b.tolist(), [0] * len(a), strict=True))
        smallest = {}
        for i, r in enumerate(root):
            smallest.setdefault(r, i)
        assert label == [smallest[r] for r in root]
