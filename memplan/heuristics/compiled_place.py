"""The heuristics' passes in C: the same plans as `memplan.heuristics.placement` and
`memplan.heuristics.time_sweep`, faster.

Why: `Placer.place` costs a few numpy calls per unit (about 20 us), and its
pair lists (`Units.build`) about as much again: 3-4 s at 100k network-like
buffers, more than the heuristics' share of a 5 s limit; and on training
steps, where tens of millions of pairs overlap in time, the lists do not fit
memory at all. The compiled kernel (``_placement_kernel.c``) lists no pairs:
it finds each unit's placed partners in an interval structure over time
(``_interval_place.h``: a max-tree of the placed buffers' ends over the
buffers sorted by start; on small problems, and where a buffer meets more than
one in sixteen of the others, a scan of the placed buffers sorted by offset,
which needs no sort per unit) and places every unit in one call, the same
gaps chosen with the same ties.

Steps of `compiled_offsets`:
- refuse (None: the caller uses `Placer`) when the kernel is not built (no C
  compiler at install time), the placement is not best or first fit, or the
  problem has optional aliases (their special rules stay in `Placer`);
- hand the kernel the problem's columns, the alias units (pinned ones with
  their bases), the buffers sorted by start, the explicit conflicts and the
  order; it keeps ``deadline`` as `Placer` does (units left when it passes
  are stacked: ``cut``).

Cost: O(n log n + E log n) for E overlapping pairs by the tree, O(n^2) by the
scan, in C (a tenth of a second at 100k network-like buffers, a few tenths
on a 30k-buffer training step); memory O(n + C) for C explicit conflicts,
whatever E.

`compiled_sweep`: the loop of `time_sweep.free_list_sweep` (release the units
whose span ended, take a gap) in C over sorted arrays of the free gaps, with
the same ties and the same cut; its Python twin took 0.5-3.4 s at 100k
buffers, more than a 1 s limit allows. Cost: O(n log n + n g) for g free gaps
(hundreds to 18k), memory O(n).
"""

from __future__ import annotations

import numpy as np

from memplan.budget import to_deadline
from memplan.heuristics.units import Units
from memplan.problem import Problem

try:
    from memplan.heuristics._placement_kernel import place as _kernel_place
    from memplan.heuristics._placement_kernel import sweep as _kernel_sweep
except ImportError:  # no C compiler at install time: `Placer` and `FreeList` in Python
    _kernel_place = _kernel_sweep = None


def available() -> bool:
    """Whether the compiled kernel (both passes) is installed."""
    return _kernel_place is not None


def fits(problem: Problem, placement: str) -> bool:
    """Whether the kernel places ``problem`` (see the module doc)."""
    return available() and placement in ("best_fit", "first_fit") \
        and not problem.alias_optional.any()


def kernel_columns(units: Units) -> tuple[np.ndarray, ...]:
    """The problem's and the units' columns as the kernel takes them (`geometry_columns`
    in ``_placement_kernel.c``)."""
    problem = units.problem
    column = np.ascontiguousarray
    return (column(problem.sizes, np.int64), column(problem.starts, np.int64),
            column(problem.ends, np.int64), column(units.unit_of, np.int64),
            column(units.rel, np.int64), column(units.member_ptr, np.int64),
            column(units.member_buffers, np.int64), column(units.extent, np.int64),
            column(units.residue, np.int64), column(units.modulus, np.int64),
            column(units.pinned_base, np.int64),
            column(np.argsort(problem.starts, kind="stable"), np.int64),
            column(problem.conflicts, np.int64).reshape(-1))


def compiled_offsets(units: Units, order: np.ndarray, placement: str,
                     deadline: float | None = None) -> tuple[np.ndarray, int]:
    """Buffer offsets of ``order`` placed by the kernel, and the units cut by ``deadline``
    (a `time.perf_counter` value). The caller checks `fits` first."""
    seconds = 0.0 if deadline is None else to_deadline(deadline)
    bases, cut = _kernel_place(*kernel_columns(units), np.ascontiguousarray(order, np.int64),
                               int(placement == "best_fit"), int(deadline is not None),
                               float(seconds))
    return units.offsets(np.frombuffer(bases, np.int64)), int(cut)


def compiled_sweep(sweep, best: bool, deadline: float | None,
                   clock_every: int) -> tuple[np.ndarray, int]:
    """Unit bases by the time sweep in C, and the units cut by ``deadline`` (a
    `time.perf_counter` value, read every ``clock_every`` units): those of
    `memplan.heuristics.time_sweep.free_list_sweep` for the same ``sweep`` (a
    `time_sweep.Sweep`). The caller checks `available` first."""
    column = np.ascontiguousarray
    seconds = 0.0 if deadline is None else to_deadline(deadline)
    bases, cut = _kernel_sweep(
        column(sweep.extent, np.int64), column(sweep.residue, np.int64),
        column(sweep.modulus, np.int64), column(sweep.order, np.int64),
        column(sweep.starts, np.int64), column(sweep.by_end, np.int64),
        column(sweep.ends, np.int64), column(sweep.reserved, np.int64).reshape(-1),
        column(sweep.base, np.int64), int(sweep.peak), int(best), int(clock_every),
        int(deadline is not None), float(seconds))
    return np.frombuffer(bases, np.int64).copy(), int(cut)
