"""What would lower the peak: changes to one tensor or one alias, each measured on the bound.

Nothing here is guessed: every figure is `memplan.bounds.lower_bound` of a
changed copy of the problem, against the bound of the problem as it is.
The changes, for a tensor live at the peak:

- ``end_earlier``: its lifetime ends one step earlier (its last reader moved
  up by one step in the schedule);
- ``recompute``: it is freed after its first reader and computed again just
  before each later reader (a copy live for that reader's step); the
  producer's inputs must then live until the last recompute, and do;
- ``split``: its producer and its readers work in two halves one after the
  other (tiling), so only half of it is live at once; the producer's inputs
  must live until the last reader has taken the first half, and do.

The last two need to know the producer and the readers (the problem's
``steps`` metadata); without it only ``end_earlier`` is measured.

For a plan, an optional alias (an in-place output over a dying input) that
the plan did not take is measured the same way: the bound with the plan's
choices (the aliases it did not take removed) against the same bound with
that one alias taken. An alias whose two groups are not both live at the
step where that floor is reached cannot lower it, and is not recomputed.

Cost: one lower bound (O(n log n) plus the alias groups) per change.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from memplan.bounds import live_bytes, lower_bound
from memplan.budget import Stopwatch, ends_after
from memplan.plan import Plan
from memplan.problem import NO_OFFSET, Alias, Buffer, Problem, alias_components
from memplan.shares import CHANGE_CPU_PER_BUFFER

CHANGES = ("end_earlier", "recompute", "split")


@dataclass(frozen=True)
class Remedy:
    """One change and what it does to the bound (bytes; ``saves`` = before - after)."""

    change: str  # end_earlier, recompute, split, or take_alias
    tensor: str  # the tensor changed (for take_alias: the alias's target)
    bound: int  # the bound after the change
    saves: int  # bytes the bound drops by (0: no help)
    detail: str  # what the change means for this tensor, in words


def producers_and_readers(problem: Problem) -> tuple[dict[str, int], dict[str, list[int]]]:
    """From the ``steps`` metadata: the step writing each tensor, and the steps reading it."""
    producer: dict[str, int] = {}
    readers: dict[str, list[int]] = {}
    for t, step in enumerate(problem.steps or ()):
        for name in step.writes:
            producer.setdefault(name, t)
        for name in step.reads:
            readers.setdefault(name, []).append(t)
    return producer, readers


def _changed(problem: Problem, changes: dict[str, list[Buffer]]) -> Problem:
    """``problem`` with some buffers replaced by others (the first keeps the id and aliases,
    the others come last); O(n) in numpy columns, no `Buffer` per row (1M buffers: one
    change in a fraction of a second, not in seconds)."""
    rows = [problem.index(id) for id in changes]
    firsts = [pieces[0] for pieces in changes.values()]
    added = [b for pieces in changes.values() for b in pieces[1:]]

    def column(values: np.ndarray, field) -> np.ndarray:
        values = values.copy()
        values[rows] = [field(b) for b in firsts]
        return np.concatenate([values, np.array([field(b) for b in added], values.dtype)])

    def listed(values: tuple, field) -> list:
        values = list(values)
        for row, b in zip(rows, firsts, strict=True):
            values[row] = field(b)
        return values + [field(b) for b in added]

    ids = problem.ids
    return Problem.from_arrays(
        column(problem.sizes, lambda b: b.size), column(problem.starts, lambda b: b.start),
        column(problem.ends, lambda b: b.end), ids=listed(ids, lambda b: b.id),
        alignments=column(problem.alignments, lambda b: b.alignment),
        pinned=column(problem.pinned, lambda b: NO_OFFSET if b.offset is None else b.offset),
        max_sizes=column(problem.max_sizes, lambda b: b.size if b.max_size is None
                         else b.max_size),
        kinds=listed(problem.kinds, lambda b: b.kind),
        allowed_regions=listed(problem.allowed_regions, lambda b: b.regions),
        aliases=problem.aliases, conflicts=[(ids[a], ids[b]) for a, b in problem.conflicts],
        capacity=problem.capacity, regions=problem.regions, name=problem.name,
        source=problem.source)


def _extend_inputs(problem: Problem, producer: int | None, until: int,
                   changes: dict[str, list[Buffer]]) -> None:
    """The buffers the producing step reads live until ``until`` (exclusive) at least."""
    if producer is None or problem.steps is None:
        return
    for name in problem.steps[producer].reads:
        if name in changes or name not in problem._index:
            continue
        b = problem.buffer(problem.index(name))
        if b.end < until:
            changes[name] = [replace(b, end=until)]


def remedies(problem: Problem, tensors: list[str], *, bound: int | None = None,
             deadline: float | None = None, cut: list[str] | None = None,
             links: tuple[dict[str, int], dict[str, list[int]]] | None = None) -> list[Remedy]:
    """Each change of `CHANGES` that applies to each of ``tensors``, measured; those that
    would not end by ``deadline`` (a `time.perf_counter` value; each is taken to last as
    long as the one before, the first `CHANGE_CPU_PER_BUFFER` a buffer) are left out, and
    then ``"remedies"`` is added to ``cut``.
    ``links``: `producers_and_readers` of the problem, when the caller has them."""
    bound = lower_bound(problem) if bound is None else bound
    producer, readers = producers_and_readers(problem) if links is None else links
    found = []
    last = len(problem) * CHANGE_CPU_PER_BUFFER  # wall seconds of the last change measured
    # (before the first: its CPU seconds as a quiet machine gives them)
    for id in tensors:
        b = problem.buffer(problem.index(id))
        tried: list[tuple[str, dict[str, list[Buffer]], str]] = []
        if b.end - b.start > 1:
            tried.append(("end_earlier", {id: [replace(b, end=b.end - 1)]},
                          f"lifetime [{b.start}, {b.end - 1}) instead of [{b.start}, {b.end})"))
        reads = sorted(set(readers.get(id, [])))
        made = producer.get(id)
        first_end, later = (max(reads[0], b.start) + 1 if reads else b.end), []
        for r in reads[1:]:
            if r <= first_end:
                first_end = r + 1  # read right after: stays live, nothing to recompute
            else:
                later.append(r)
        if made is not None and later and b.end <= reads[-1] + 1:
            pieces = [replace(b, end=first_end)]
            pieces += [Buffer(f"{id}@recomputed{r}", b.size, r, r + 1, b.alignment,
                              kind="activation") for r in later]
            change = {id: pieces}
            _extend_inputs(problem, made, later[-1] + 1, change)
            tried.append(("recompute", change,
                          f"freed after step {reads[0]}, computed again for step"
                          f"{'s' if len(later) > 1 else ''} {', '.join(map(str, later))}"))
        if made is not None and reads and b.size > 1:
            half = -(-b.size // 2)
            change = {id: [replace(b, size=half)]}
            _extend_inputs(problem, made, reads[-1] + 1, change)
            tried.append(("split", change, f"two halves of {half} B, produced and read one "
                                           f"after the other"))
        for name, change, detail in tried:
            if ends_after(last, deadline):  # the last change's time again would pass it
                if cut is not None:
                    cut.append("remedies")
                return found
            watch = Stopwatch()
            after = lower_bound(_changed(problem, change))
            last = watch.elapsed()
            found.append(Remedy(name, id, after, bound - after, detail))
    return found


def untaken_aliases(problem: Problem, plan: Plan) -> list[int]:
    """The optional aliases (by number) whose offsets the plan does not honour."""
    offsets = plan.offsets
    return [k for k in np.flatnonzero(problem.alias_optional).tolist()
            if offsets[problem.alias_dst[k]] != offsets[problem.alias_src[k]]
            + problem.alias_delta[k]]


def alias_remedies(problem: Problem, plan: Plan, *, most: int = 200,
                   deadline: float | None = None, cut: list[str] | None = None
                   ) -> tuple[int | None, list[Remedy]]:
    """``(floor, remedies)``: the bound under the plan's alias choices (None: the limit
    passed before it), and per optional alias
    the plan did not take (at most ``most`` of them, and those that end by ``deadline``, a
    `time.perf_counter` value, each a rebuild of `CHANGE_CPU_PER_BUFFER` a buffer, else
    ``"in-place aliases"`` is added to ``cut``) the floor
    if it took that one too."""
    untaken = untaken_aliases(problem, plan)
    if not untaken:
        return lower_bound(problem), []
    rebuild = len(problem) * CHANGE_CPU_PER_BUFFER
    if ends_after(rebuild, deadline):  # the floor: a bound of the problem with fewer
        if cut is not None:  # aliases, one more rebuild the limit has no room for
            cut.append("in-place aliases")
        return None, []
    dropped = set(untaken)

    def without(skip: set[int]) -> Problem:
        aliases: list[Alias] = [a for k, a in enumerate(problem.aliases) if k not in skip]
        return problem.replace(aliases=aliases, widths=None, steps=None)

    chosen = without(dropped)
    floor = lower_bound(chosen)
    # taking alias k can lower the floor only if it lowers the load at a step where the
    # floor is reached: both its groups must have a member live there
    load = live_bytes(chosen)
    peak = int(np.argmax(load)) if len(load) else 0
    root = alias_components(chosen, np.arange(len(chosen.aliases)))[0]
    live_roots = set(root[(chosen.starts <= peak) & (chosen.ends > peak)].tolist())
    found = []
    for k in untaken[:most]:
        if ends_after(rebuild, deadline):
            if cut is not None:
                cut.append("in-place aliases")
            break
        both = {int(root[problem.alias_src[k]]), int(root[problem.alias_dst[k]])}
        after = lower_bound(without(dropped - {k})) if both <= live_roots and \
            int(load[peak]) == floor else floor
        alias = problem.aliases[k]
        found.append(Remedy("take_alias", alias.dst, after, floor - after,
                            f"{alias.dst} in place over {alias.src}"
                            + (f" (+{alias.delta} B)" if alias.delta else "")))
    return floor, found


__all__ = ["CHANGES", "Remedy", "alias_remedies", "producers_and_readers", "remedies",
           "untaken_aliases"]
