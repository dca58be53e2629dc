"""The heuristics' passes in C: the same plans as `memplan.heuristics.placement` and
`memplan.heuristics.time_sweep`, faster.

Why: `Placer.place` costs a few numpy calls per unit (about 20 us), and its
pair lists (`Units.build`) about as much again: 3-4 s at 100k network-like
buffers, more than the heuristics' share of a 5 s limit, so that the breadth
pass, which wins there, never ran. The compiled kernel
(``_placement_kernel.c``) lists the pairs itself and places every unit in one
call, the same gaps chosen with the same ties.

Steps of `compiled_offsets`:
- refuse (None: the caller uses `Placer`) when the kernel is not built (no C
  compiler at install time), the placement is not best or first fit, the
  problem has pinned buffers or optional aliases (their special rules stay in
  `Placer`), or more than ``max_pairs`` overlapping pairs (the kernel's pair
  lists take 16 bytes a pair);
- hand the kernel the problem's columns, the alias units, the buffers sorted
  by start, the explicit conflicts and the order; it keeps ``deadline`` as
  `Placer` does (units left when it passes are stacked: ``cut``).

Cost: O(n log n + E log L) for E overlapping pairs and L buffers live at once,
in C (a tenth of a second at 100k network-like buffers); memory O(n + E).

`compiled_sweep`: the loop of `time_sweep.free_list_sweep` (release the units
whose span ended, take a gap) in C over sorted arrays of the free gaps, with
the same ties and the same cut; its Python twin took 0.5-3.4 s at 100k
buffers, more than a 1 s limit allows. Cost: O(n log n + n g) for g free gaps
(hundreds to 18k), memory O(n).
"""

from __future__ import annotations

import time

import numpy as np

from memplan.bounds import time_overlap_count
from memplan.heuristics.units import Units
from memplan.problem import NO_OFFSET, Problem

try:
    from memplan.heuristics._placement_kernel import place as _kernel_place
    from memplan.heuristics._placement_kernel import sweep as _kernel_sweep
except ImportError:  # no C compiler at install time: `Placer` and `FreeList` in Python
    _kernel_place = _kernel_sweep = None

MAX_PAIRS = 20_000_000  # more overlapping pairs: the kernel's lists would take > 320 MB


def available() -> bool:
    """Whether the compiled kernel (both passes) is installed."""
    return _kernel_place is not None


def fits(problem: Problem, placement: str, *, max_pairs: int = MAX_PAIRS,
         pairs: int | None = None) -> bool:
    """Whether the kernel places ``problem`` (see the module doc); ``pairs``: the count of
    overlapping pairs if known."""
    if not available() or placement not in ("best_fit", "first_fit"):
        return False
    if problem.alias_optional.any() or (problem.pinned != NO_OFFSET).any():
        return False
    count = time_overlap_count(problem.starts, problem.ends) if pairs is None else pairs
    return count + len(problem.conflicts) <= max_pairs


def compiled_offsets(units: Units, order: np.ndarray, placement: str,
                     deadline: float | None = None) -> tuple[np.ndarray, int]:
    """Buffer offsets of ``order`` placed by the kernel, and the units cut by ``deadline``
    (a `time.perf_counter` value). The caller checks `fits` first."""
    problem = units.problem
    column = np.ascontiguousarray
    seconds = 0.0 if deadline is None else deadline - time.perf_counter()
    bases, cut = _kernel_place(
        column(problem.sizes, np.int64), column(problem.starts, np.int64),
        column(problem.ends, np.int64), column(units.unit_of, np.int64),
        column(units.rel, np.int64), column(units.member_ptr, np.int64),
        column(units.member_buffers, np.int64), column(units.extent, np.int64),
        column(units.residue, np.int64), column(units.modulus, np.int64),
        column(np.argsort(problem.starts, kind="stable"), np.int64),
        column(problem.conflicts, np.int64).reshape(-1), column(order, np.int64),
        int(placement == "best_fit"), int(deadline is not None), float(seconds))
    return units.offsets(np.frombuffer(bases, np.int64)), int(cut)


def compiled_sweep(sweep, best: bool, deadline: float | None,
                   clock_every: int) -> tuple[np.ndarray, int]:
    """Unit bases by the time sweep in C, and the units cut by ``deadline`` (a
    `time.perf_counter` value, read every ``clock_every`` units): those of
    `memplan.heuristics.time_sweep.free_list_sweep` for the same ``sweep`` (a
    `time_sweep.Sweep`). The caller checks `available` first."""
    column = np.ascontiguousarray
    seconds = 0.0 if deadline is None else deadline - time.perf_counter()
    bases, cut = _kernel_sweep(
        column(sweep.extent, np.int64), column(sweep.residue, np.int64),
        column(sweep.modulus, np.int64), column(sweep.order, np.int64),
        column(sweep.starts, np.int64), column(sweep.by_end, np.int64),
        column(sweep.ends, np.int64), column(sweep.reserved, np.int64).reshape(-1),
        column(sweep.base, np.int64), int(sweep.peak), int(best), int(clock_every),
        int(deadline is not None), float(seconds))
    return np.frombuffer(bases, np.int64).copy(), int(cut)
