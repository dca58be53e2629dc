"""The compiled relaxation sweep (``relax`` in ``memplan/deploy/_layout_kernel.c``) against
its numpy twin in `memplan.deploy.regions_sweep`: the same optimum and choice, or both
None, and the same record (each step's rows in any order)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import memplan.deploy.regions_sweep as sweep
from memplan.deploy.regions_exact import RegionModel
from memplan.problem import Buffer, Problem, Region
from tests.test_regions import _small_region_problems
from tests.test_regions_layout_kernel import _random_region_problem, _same


def _even_region_problem(seed: int) -> tuple[Problem, np.ndarray]:
    """15-30 buffers of two sizes over 20 steps, each read once, a fast region of a third
    of the peak load: many choices of the same cost, so the ties decide the choice."""
    rng = np.random.default_rng(seed)
    count = int(rng.integers(15, 31))
    starts = rng.integers(0, 20, count)
    ends = starts + rng.integers(1, 5, count)
    sizes = rng.choice([64, 128], count)
    load = max(int(sizes[(starts <= t) & (ends > t)].sum()) for t in range(25))
    regions = [Region("fast", max(128, load // 3 // 64 * 64), 0.0), Region("slow", None, 1.0)]
    buffers = [Buffer(f"t{i}", int(sizes[i]), int(starts[i]), int(ends[i]))
               for i in range(count)]
    return Problem(buffers, regions=regions, name=f"even {seed}"), np.ones(count)


def _both(model, **options):
    """The numpy sweep's answer and record, then the kernel's."""
    kernel = sweep._kernel_relax
    assert kernel is not None  # built by `python setup.py build_ext --inplace`
    numpy_record, compiled_record = {}, {}
    try:
        sweep._kernel_relax = None
        numpy_found = sweep.sweep_relaxation(model, record=numpy_record, **options)
    finally:
        sweep._kernel_relax = kernel
    compiled_found = sweep.sweep_relaxation(model, record=compiled_record, **options)
    return (numpy_found, numpy_record), (compiled_found, compiled_record)


def _assert_same(numpy_side, compiled_side):
    (numpy_found, numpy_record), (compiled_found, compiled_record) = numpy_side, compiled_side
    if numpy_found is None or compiled_found is None:
        assert numpy_found is None and compiled_found is None
    else:
        assert numpy_found[0] == compiled_found[0]
        assert np.array_equal(numpy_found[1], compiled_found[1])
    assert list(numpy_record) == list(compiled_record)
    for step, (live, states, costs) in numpy_record.items():
        seen, rows, paid = compiled_record[step]
        assert np.array_equal(live, seen)
        order = np.lexsort(states.T[::-1]) if states.shape[1] else np.arange(len(states))
        assert np.array_equal(states[order], rows)  # the kernel's rows come sorted
        assert np.array_equal(costs[order], paid)


@settings(max_examples=100, deadline=None)
@given(seed=st.integers(0, 10_000), reverse=st.booleans(),
       max_states=st.sampled_from([1, 16, sweep.MAX_STATES, sweep.MAX_STATES]),
       max_work=st.sampled_from([40, 4_000, sweep.MAX_WORK, sweep.MAX_WORK]),
       ceiling=st.sampled_from([None, -1, 0, 1, 1_000]),
       tops=st.lists(st.sampled_from([None, None, 0.1, 0.5, 0.9]), min_size=3, max_size=3),
       even=st.booleans())
def test_the_compiled_relaxation_is_the_numpy_one_on_random_models(seed, reverse, max_states,
                                                                   max_work, ceiling, tops,
                                                                   even):
    """Forwards and backwards, within ceilings about the optimum (``ceiling``: its offset
    from it), past the states or the work, under kept tops (a share of each limit: no
    region left for some units, or loads that no choice meets); ``even``: on models of
    many ties."""
    problem, reads = (_even_region_problem if even else _random_region_problem)(seed)
    model = RegionModel(problem, reads, packed=False)
    model.kept = {k: int(model.limit[k] * top) for k, top in enumerate(tops[:len(model.limit)])
                  if top is not None}
    optimum = sweep.sweep_relaxation(model)
    if ceiling is not None and optimum is not None:
        ceiling += optimum[0]
    _assert_same(*_both(model, ceiling=ceiling, max_states=max_states, max_work=max_work,
                        reverse=reverse))


@pytest.mark.parametrize("seed", range(6))
def test_both_relaxations_find_the_optimum_and_give_up_alike(seed):
    """Each way the sweep ends, on one model: an optimum, nothing below it, past the
    states, past the work; a capped model (unless ``uncapped``)."""
    problem, reads = _random_region_problem(seed)
    model = RegionModel(problem, reads, packed=False)
    found = sweep.sweep_relaxation(model)
    assert found is not None  # these models have an optimum: not two Nones compared
    for options in ({}, {"reverse": True}, {"ceiling": found[0]}, {"ceiling": found[0] - 1},
                    {"max_states": 2}, {"max_work": 100}):
        _assert_same(*_both(model, **options))
    model.capped = (0, 0)
    _assert_same(*_both(model))
    _assert_same(*_both(model, uncapped=True))


@pytest.mark.parametrize("seed,problem,weights", _small_region_problems()[::2],
                         ids=lambda x: str(x) if isinstance(x, int) else "")
def test_the_compiled_relaxation_is_the_numpy_one_on_small_region_problems(seed, problem,
                                                                          weights):
    """Forwards, backwards, and just below the optimum (no choice left)."""
    model = RegionModel(problem.replace(aliases=[a for a in problem.aliases if not a.optional]),
                        weights, packed=False)
    found = sweep.sweep_relaxation(model)
    below = {} if found is None else {"ceiling": found[0] - 1}
    for options in ({}, {"reverse": True}, below):
        _assert_same(*_both(model, **options))


def test_the_guides_columns_are_the_numpy_record_sorted(monkeypatch):
    """The compiled layout sweep's guide (`Record`) holds, step by step, what the numpy
    sweep records: the live units, the rows (sorted), their costs."""
    from memplan.deploy.regions_layout import Guide

    problem, reads = _random_region_problem(3)
    model = RegionModel(problem, reads, packed=False)
    columns, record = Guide(model, None).columns, {}
    monkeypatch.setattr(sweep, "_kernel_relax", None)
    assert sweep.sweep_relaxation(model, reverse=True, record=record, uncapped=True)
    assert np.array_equal(columns.steps, sorted(record)) and len(columns.steps)
    assert columns.seen_ptr[-1] == len(columns.seen)
    assert columns.state_ptr[-1] == len(columns.costs)
    assert columns.cell_ptr[-1] == len(columns.states)
    for i, step in enumerate(columns.steps.tolist()):
        live, states, costs = record[step]
        order = np.lexsort(states.T[::-1]) if states.shape[1] else np.arange(len(states))
        assert np.array_equal(columns.seen[columns.seen_ptr[i]:columns.seen_ptr[i + 1]], live)
        assert np.array_equal(columns.states[columns.cell_ptr[i]:columns.cell_ptr[i + 1]],
                              states[order].reshape(-1))
        assert np.array_equal(columns.costs[columns.state_ptr[i]:columns.state_ptr[i + 1]],
                              costs[order])


@pytest.mark.parametrize("seed", range(4))
def test_the_layout_sweep_finds_the_same_without_the_extension(seed, monkeypatch):
    """Neither sweep compiled (a build without a C compiler): the numpy guide and beam find
    what the compiled ones do, forwards and backwards."""
    import memplan.deploy.regions_layout as layout

    problem, reads = _random_region_problem(200 + seed)
    model = RegionModel(problem, reads, packed=False)
    compiled = [layout.sweep_layout(model, max_states=16, reverse=reverse)
                for reverse in (False, True)]
    assert any(found is not None for found in compiled)  # not two Nones compared
    monkeypatch.setattr(layout, "_kernel_sweep", None)
    monkeypatch.setattr(sweep, "_kernel_relax", None)
    for reverse, found in zip((False, True), compiled, strict=True):
        assert _same(layout.sweep_layout(model, max_states=16, reverse=reverse), found)
