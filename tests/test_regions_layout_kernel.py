"""The compiled layout sweep (``memplan/deploy/_layout_kernel.c``) against its Python twin
in `memplan.deploy.regions_layout`: the same cost, regions and offsets, or both None."""

from __future__ import annotations

import time

import numpy as np
import pytest

import memplan.deploy.regions_layout as layout
from memplan.deploy.regions import slow_measures
from memplan.deploy.regions_exact import RegionModel
from memplan.problem import Buffer, Problem, Region
from tests.test_regions import _small_region_problems


def _random_region_problem(seed: int) -> tuple[Problem, np.ndarray]:
    """20-45 buffers over 30 steps (some aligned, one pinned in the fast region), a fast
    region of a third of the peak load, sometimes a middle one, and a read count each."""
    rng = np.random.default_rng(seed)
    count = int(rng.integers(20, 46))
    starts = rng.integers(0, 30, count)
    ends = starts + rng.integers(1, 6, count)
    sizes = rng.integers(1, 33, count) * 16
    load = max(int(sizes[(starts <= t) & (ends > t)].sum()) for t in range(40))
    regions = [Region("fast", max(64, load // 3 // 16 * 16), 0.0)]
    if rng.random() < 0.4:
        regions.append(Region("mid", max(64, load // 4 // 16 * 16), 1.0))
    regions.append(Region("slow", None, float(rng.integers(2, 6))))
    buffers = [Buffer(f"t{i}", int(sizes[i]), int(starts[i]), int(ends[i]),
                      alignment=64 if rng.random() < 0.2 else 1) for i in range(count)]
    buffers[0] = Buffer("pinned", 32, 0, 3, offset=0, regions=("fast",))
    return Problem(buffers, regions=regions, name=f"random {seed}"), \
        rng.choice([1, 2, 3, 7], count)


def _both(model, **options):
    """The Python sweep's answer, then the kernel's."""
    kernel = layout._kernel_sweep
    assert kernel is not None  # built by `python setup.py build_ext --inplace`
    try:
        layout._kernel_sweep = None
        python = layout.sweep_layout(model, **options)
    finally:
        layout._kernel_sweep = kernel
    return python, layout.sweep_layout(model, **options)


def _same(python, compiled) -> bool:
    if python is None or compiled is None:
        return python is None and compiled is None
    return python[0] == compiled[0] and np.array_equal(python[1], compiled[1]) and \
        np.array_equal(python[2], compiled[2])


@pytest.mark.parametrize("seed", range(12))
def test_the_compiled_sweep_is_the_python_sweep_on_random_region_problems(seed):
    problem, reads = _random_region_problem(seed)
    model = RegionModel(problem, reads, packed=False)
    found = []
    for max_states in (1, 4, 64, 256):
        for reverse in (False, True):
            python, compiled = _both(model, max_states=max_states, reverse=reverse)
            assert _same(python, compiled), (max_states, reverse)
            found.append(python)
    costs = [f[0] for f in found if f is not None]
    assert costs  # the beams find plans here: the comparison is not of two Nones
    ceiling = min(costs)
    for limit in (ceiling, ceiling - 1):
        assert _same(*_both(model, max_states=16, ceiling=limit))
    assert _same(*_both(model, max_states=64, max_work=20_000))  # past the work: None both
    assert _both(model, deadline=time.perf_counter() - 1.0) == (None, None)  # past its limit


@pytest.mark.parametrize("seed", range(8))
def test_the_compiled_sweep_keeps_the_aims_as_the_python_sweep_does(seed):
    """With slow bytes and a slow arena aimed at (two regions), half of a region plan's."""
    problem, reads = _random_region_problem(100 + seed)
    problem = problem.replace(regions=[problem.regions[0], problem.regions[-1]])
    model = RegionModel(problem, reads, packed=False)
    from memplan.deploy.regions import plan_regions

    start = plan_regions(problem, reads=reads)
    slow_bytes, slow_arena = slow_measures(problem, start)
    for aim_bytes, aim in ((slow_bytes, slow_arena), (slow_bytes // 2, None),
                           (None, slow_arena * 3 // 4)):
        model.aim_bytes, model.aim = aim_bytes, aim
        for reverse in (False, True):
            assert _same(*_both(model, max_states=64, reverse=reverse))


@pytest.mark.parametrize("seed,problem,weights", _small_region_problems()[::2],
                         ids=lambda x: str(x) if isinstance(x, int) else "")
def test_the_compiled_sweep_is_the_python_sweep_on_small_region_problems(seed, problem,
                                                                        weights):
    problem = problem.replace(aliases=[a for a in problem.aliases if not a.optional])
    model = RegionModel(problem, weights, packed=False)
    for max_states in (1, 256):
        assert _same(*_both(model, max_states=max_states))
        assert _same(*_both(model, max_states=max_states, reverse=True))
