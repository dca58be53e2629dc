"""The one vocabulary every part of memplan speaks: Buffer, Alias, Region, Problem, Plan.

A *buffer* has a size in bytes and a half-open lifetime ``[start, end)`` in
schedule steps. Two buffers *conflict* when their lifetimes intersect or the
problem lists them as conflicting; conflicting buffers need disjoint address
ranges ``[offset, offset + size)``. A *plan* gives every buffer an offset; its
*arena size* is ``max(offset + size)``::

    address
      ^   +-----+
      |   |  c  |        a: [0, 3)  b: [3, 6)  c: [1, 2)
      +---+-----+--+     a and b may share bytes: their lifetimes
      |  a   |  b  |     do not intersect (half-open).
      +------+-----+---> time

`Problem` stores its buffers as read-only numpy arrays (``sizes``, ``starts``,
``ends``, ``alignments``, ``pinned``), so that a 100k-buffer problem costs a
few megabytes and every planner works on arrays; `Buffer` is for building a
problem and reading one row back. A buffer's *index* (``_idx``) is its
position in these arrays; its *id* is its name. The two are never mixed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import chain
from operator import attrgetter
from typing import Any

import numpy as np

from memplan.errors import ProblemError
from memplan.limits import MAX_BYTES, check_extent, int_column, whole

try:
    from memplan._union_find import union_find as _union_find_kernel
except ImportError:  # the extension is optional: `union_find` gives the same groups
    _union_find_kernel = None

KINDS: tuple[str, ...] = ("activation", "input", "output", "scratch", "weight")
NO_OFFSET = -1  # in `Problem.pinned`: the buffer is not pinned


@dataclass(frozen=True)
class Buffer:
    """One tensor or workspace to place. Built by frontends and back ends."""

    id: str
    size: int  # bytes; for variable-size scratch the minimum it needs
    start: int  # first step the buffer is live
    end: int  # first step it is dead again: the lifetime is half-open [start, end)
    alignment: int = 1  # offset % alignment == 0
    offset: int | None = None  # pinned offset, or None to let the planner choose
    regions: tuple[str, ...] | None = None  # allowed regions, preferred first; None = any
    kind: str = "activation"  # activation, input, output, scratch or weight
    max_size: int | None = None  # variable-size scratch: the most it can use

    @property
    def lifetime(self) -> tuple[int, int]:
        """``(start, end)``: the half-open steps the buffer is live."""
        return (self.start, self.end)


@dataclass(frozen=True)
class Alias:
    """``offset[dst] == offset[src] + delta``: dst lives inside src's memory.

    In-place operators (delta 0), views, and a Concat input written into its
    slice of the output (delta = the slice's byte offset). Aliased buffers may
    overlap exactly as the alias says. An ``optional`` alias (may-alias) is a
    choice the planner makes; a mandatory one is a constraint.
    """

    src: str
    dst: str
    delta: int = 0
    optional: bool = False


@dataclass(frozen=True)
class Step:
    """What runs at one schedule step, when the frontend knows it (metadata, optional).

    ``reads`` and ``writes`` name tensors: buffer ids where the tensor is a
    buffer, any other name (a weight left out, a zero-size tensor) is kept but
    means nothing to a planner. They give every buffer its producer and its
    consumers (`memplan.explain`). ``constants`` name what the operator reads
    from the model's constants (weights, stored data: never in the arena); a
    frontend that fills it lists in ``reads`` every other value the operator
    reads (a graph input not planned, a size computed at run time), so that a
    step whose reads are all computed from constants is known to be one
    (`memplan.diagnosis.constant_folding`).
    """

    name: str = ""  # the operator's name (ONNX node name), "" when it has none
    op: str = ""  # the operator's type: Conv, Relu, ...
    reads: tuple[str, ...] = ()  # tensors the operator reads, constants aside
    writes: tuple[str, ...] = ()  # tensors the operator writes
    constants: tuple[str, ...] = ()  # constants (weights) the operator reads


@dataclass(frozen=True)
class Region:
    """A memory pool: on-chip SRAM, external DRAM. Region 0 is the default."""

    name: str
    capacity: int | None = None  # bytes, or None for unbounded
    cost: float = 0.0  # cost of one byte placed here (0 for the fastest memory)


def _readonly(values, dtype=np.int64) -> np.ndarray:
    array = np.array(values, dtype=dtype)
    array.flags.writeable = False
    return array


def _checked_regions(regions: Iterable[Region], source: str | None) -> tuple[Region, ...]:
    """The regions, refused when a name repeats or a capacity or cost is not a number."""
    regions = tuple(regions)
    seen: set[str] = set()
    for region in regions:
        if not isinstance(region, Region):
            raise ProblemError(f"expected a Region, got {type(region).__name__}", file=source)
        where = f"region {region.name!r}"
        if not isinstance(region.name, str) or not region.name:
            raise ProblemError(f"a region's name must be a non-empty string, got "
                               f"{region.name!r}", file=source)
        if region.name in seen:
            raise ProblemError(f"{where}: duplicate region name", file=source)
        seen.add(region.name)
        if region.capacity is not None:
            whole(region.capacity, f"{where}: capacity", file=source, lowest=1)
        cost = region.cost
        if isinstance(cost, bool | np.bool_) or not isinstance(cost, int | float | np.number) \
                or not math.isfinite(cost) or cost < 0:
            raise ProblemError(f"{where}: cost must be a finite number >= 0, got {cost!r}",
                               file=source)
    return regions


class Problem:
    """Buffers with sizes and lifetimes, plus aliases, conflicts, capacity and regions.

    Build it from `Buffer` objects (``Problem(buffers, aliases=...)``) or, for
    large generated problems, from arrays (`Problem.from_arrays`). Every check
    runs once here, so planners may trust what they get: sizes > 0, end >
    start >= 0, alignment >= 1, pinned offsets aligned, ids unique, aliases and
    conflicts between known buffers, mandatory alias deltas consistent.
    Raises `ProblemError` naming the buffer and the field otherwise.
    """

    def __init__(self, buffers: Iterable[Buffer], *, aliases: Iterable[Alias] = (),
                 conflicts: Iterable[tuple[str, str]] = (), capacity: int | None = None,
                 widths: Sequence[int] | None = None, regions: Iterable[Region] = (),
                 name: str = "", source: str | None = None,
                 steps: Iterable[Step] | None = None):
        buffers = list(buffers)
        for buffer in buffers:
            if not isinstance(buffer, Buffer):
                raise ProblemError(f"expected a Buffer, got {type(buffer).__name__}",
                                   file=source)
        self._init(
            ids=[b.id for b in buffers], sizes=[b.size for b in buffers],
            starts=[b.start for b in buffers], ends=[b.end for b in buffers],
            alignments=[b.alignment for b in buffers],
            pinned=[NO_OFFSET if b.offset is None else b.offset for b in buffers],
            max_sizes=[b.size if b.max_size is None else b.max_size for b in buffers],
            kinds=[b.kind for b in buffers], allowed_regions=[b.regions for b in buffers],
            aliases=aliases, conflicts=conflicts, capacity=capacity, widths=widths,
            regions=regions, name=name, source=source, steps=steps,
        )

    @classmethod
    def from_arrays(cls, sizes, starts, ends, *, ids: Sequence[str] | None = None,
                    alignments=None, pinned=None, aliases: Iterable[Alias] = (),
                    conflicts: Iterable[tuple[str, str]] = (), capacity: int | None = None,
                    widths=None, name: str = "", source: str | None = None,
                    steps: Iterable[Step] | None = None, pins_from_plan: bool = False,
                    max_sizes=None, kinds: Sequence[str] | None = None,
                    allowed_regions: Sequence[tuple[str, ...] | None] | None = None,
                    regions: Iterable[Region] = ()) -> Problem:
        """Build a problem straight from arrays (ids default to "0", "1", ...); O(n).
        The columns are those of `Buffer` (``pinned``: `NO_OFFSET` where free).

        ``pins_from_plan``: the pinned offsets are those of a valid plan of a larger
        problem (large-neighbourhood search's obstacles), so no two of them clash, and
        the check that they do not (quadratic in the worst case) is skipped.
        """
        n = len(sizes)
        problem = cls.__new__(cls)
        problem._init(
            ids=[str(i) for i in range(n)] if ids is None else list(ids),
            sizes=sizes, starts=starts, ends=ends,
            alignments=np.ones(n, np.int64) if alignments is None else alignments,
            pinned=np.full(n, NO_OFFSET, np.int64) if pinned is None else pinned,
            max_sizes=sizes if max_sizes is None else max_sizes, kinds=kinds,
            allowed_regions=allowed_regions, aliases=aliases, conflicts=conflicts,
            capacity=capacity, widths=widths, regions=regions, name=name,
            source=source, steps=steps, check_pins=not pins_from_plan,
        )
        return problem

    @classmethod
    def from_conflicts(cls, sizes: dict[str, int], conflicts: Iterable[tuple[str, str]], *,
                       capacity: int | None = None, name: str = "") -> Problem:
        """A conflict-graph problem: no lifetimes, only pairs that may not share memory.

        Each buffer gets its own time step ``[i, i + 1)``, so no two lifetimes
        intersect and the explicit conflicts are the whole story.
        """
        buffers = [Buffer(id, size, i, i + 1) for i, (id, size) in enumerate(sizes.items())]
        return cls(buffers, conflicts=conflicts, capacity=capacity, name=name)

    def _init(self, *, ids, sizes, starts, ends, alignments, pinned, max_sizes, kinds,
              allowed_regions, aliases, conflicts, capacity, widths, regions, name, source,
              steps=None, check_pins=True):
        self.name = name
        self.source = source
        self.ids: tuple[str, ...] = tuple(str(i) for i in ids)
        ids = self.ids
        self.sizes = int_column(sizes, "size", ids, file=source)
        self.starts = int_column(starts, "start", ids, file=source)
        self.ends = int_column(ends, "end", ids, file=source)
        self.alignments = int_column(alignments, "alignment", ids, file=source)
        self.pinned = int_column(pinned, "pinned offset", ids, file=source)
        self.max_sizes = int_column(max_sizes, "max_size", ids, file=source)
        n = len(self.ids)
        if not all(len(a) == n for a in (self.sizes, self.starts, self.ends, self.alignments,
                                          self.pinned, self.max_sizes)):
            raise ProblemError("arrays of different lengths", file=source)
        self.kinds: tuple[str, ...] = tuple(kinds) if kinds is not None else ("activation",) * n
        self.allowed_regions: tuple[tuple[str, ...] | None, ...] = (
            tuple(None if r is None else tuple(r) for r in allowed_regions)
            if allowed_regions is not None else (None,) * n)
        self.regions: tuple[Region, ...] = _checked_regions(regions, source)
        self.capacity = None if capacity is None else whole(capacity, "capacity", file=source,
                                                            lowest=-MAX_BYTES)
        self.widths = None if widths is None else int_column(
            widths, "widths entry", (), file=source)
        if self.widths is not None and (self.widths < 0).any():
            raise ProblemError(f"widths must be >= 0, got {int(self.widths.min())}", file=source)
        self.steps: tuple[Step, ...] | None = None if steps is None else _steps(steps, source)
        self._index = {id: idx for idx, id in enumerate(self.ids)}
        self._check_buffers()
        aliases = tuple(aliases)
        for a in aliases:
            if not isinstance(a, Alias):
                raise ProblemError(f"expected an Alias, got {type(a).__name__}", file=source)
            whole(a.delta, f"alias {a.src!r} -> {a.dst!r}: delta", file=source,
                  lowest=-MAX_BYTES)
            if not isinstance(a.optional, bool | np.bool_):
                raise ProblemError(f"alias {a.src!r} -> {a.dst!r}: optional must be true or "
                                   f"false, got {a.optional!r}", file=source)
        self.aliases: tuple[Alias, ...] = aliases
        self.alias_src = _readonly([self._lookup(a.src, "alias source") for a in self.aliases])
        self.alias_dst = _readonly([self._lookup(a.dst, "alias target") for a in self.aliases])
        self.alias_delta = _readonly([a.delta for a in self.aliases])
        self.alias_optional = _readonly([a.optional for a in self.aliases], dtype=bool)
        pairs = [(self._lookup(a, "conflict"), self._lookup(b, "conflict")) for a, b in conflicts]
        self.conflicts = _readonly(np.array(pairs, np.int64).reshape(-1, 2))
        held = self.pinned != NO_OFFSET
        check_extent(self.max_sizes, self.alignments, self.alias_delta,
                     self.pinned[held] + self.max_sizes[held], file=source)
        self._check_relations(check_pins)

    # ----------------------------------------------------------------- checks
    def _fail(self, idx: int, message: str):
        raise ProblemError(message, file=self.source, buffer=self.ids[idx])

    def _check_buffers(self):
        n = len(self.ids)
        if len(self._index) != n:
            seen: set[str] = set()
            for idx, id in enumerate(self.ids):
                if id in seen:
                    self._fail(idx, "duplicate id")
                seen.add(id)
        checks = [
            (self.sizes <= 0, lambda i: f"size must be positive, got {self.sizes[i]}"),
            (self.starts < 0, lambda i: f"start must be >= 0, got {self.starts[i]}"),
            (self.ends <= self.starts,
             lambda i: f"empty lifetime [{self.starts[i]}, {self.ends[i]}): end must be > start"),
            (self.alignments < 1, lambda i: f"alignment must be >= 1, got {self.alignments[i]}"),
            ((self.pinned < 0) & (self.pinned != NO_OFFSET),
             lambda i: f"pinned offset must be >= 0, got {self.pinned[i]}"),
            ((self.pinned != NO_OFFSET) & (self.pinned % np.maximum(self.alignments, 1) != 0),
             lambda i: f"pinned offset {self.pinned[i]} is not a multiple of its alignment "
                       f"{self.alignments[i]}"),
            (self.max_sizes < self.sizes,
             lambda i: f"max_size {self.max_sizes[i]} is below size {self.sizes[i]}"),
        ]
        for bad, message in checks:
            if n and bad.any():
                idx = int(np.flatnonzero(bad)[0])
                self._fail(idx, message(idx))
        bad_kinds = set(self.kinds) - set(KINDS)
        if bad_kinds:
            idx = next(i for i, k in enumerate(self.kinds) if k in bad_kinds)
            self._fail(idx, f"unknown kind {self.kinds[idx]!r}; valid kinds: {', '.join(KINDS)}")
        region_names = {r.name for r in self.regions}
        for idx, allowed in enumerate(self.allowed_regions):
            if allowed is not None and not set(allowed) <= region_names:
                unknown = sorted(set(allowed) - region_names)
                self._fail(idx, f"unknown region(s) {', '.join(unknown)}")
        if self.capacity is not None and self.capacity <= 0:
            raise ProblemError(f"capacity must be positive, got {self.capacity}", file=self.source)

    def _lookup(self, id: str, what: str) -> int:
        try:
            return self._index[id]
        except KeyError:
            raise ProblemError(f"{what} names unknown buffer {id!r}", file=self.source) from None

    def _check_relations(self, check_pins: bool = True):
        for a, b in self.conflicts:
            if a == b:
                self._fail(int(a), "conflicts with itself")
        for k in range(len(self.aliases)):
            if self.alias_src[k] == self.alias_dst[k]:
                self._fail(int(self.alias_dst[k]), "aliases itself")
        root, delta = self.alias_groups  # raises on contradicting deltas
        anchors: dict[int, tuple[int, int]] = {}  # group root -> (its implied offset, by whom)
        for idx in np.flatnonzero(self.pinned != NO_OFFSET):
            anchor = int(self.pinned[idx] - delta[idx])
            other = anchors.setdefault(int(root[idx]), (anchor, int(idx)))
            if other[0] != anchor:
                self._fail(int(idx), f"pinned offset contradicts the pinned offset of "
                                     f"{self.ids[other[1]]!r} through their aliases")
        for k in range(len(self.aliases)):
            src, dst = int(self.alias_src[k]), int(self.alias_dst[k])
            g = math.gcd(int(self.alignments[src]), int(self.alignments[dst]))
            if self.alias_delta[k] % g:
                self._fail(dst, f"alias delta {self.alias_delta[k]} can never align "
                                f"{self.alignments[dst]}-aligned {self.ids[dst]!r} with "
                                f"{self.alignments[src]}-aligned {self.ids[src]!r}")
        _check_sharing(self, root, delta)
        if check_pins:
            _check_pins(self, root, delta)

    # ------------------------------------------------------------ accessors
    def __len__(self) -> int:
        return len(self.ids)

    def __repr__(self) -> str:
        name = f" {self.name!r}" if self.name else ""
        return (f"<Problem{name}: {len(self)} buffers, {len(self.aliases)} aliases, "
                f"{len(self.conflicts)} conflicts, capacity {self.capacity}>")

    def index(self, id: str) -> int:
        """The position of buffer ``id`` in the arrays."""
        return self._lookup(id, "lookup")

    def buffer(self, idx: int) -> Buffer:
        """Row ``idx`` as a `Buffer` (for reading one buffer, not for loops over all)."""
        pinned = int(self.pinned[idx])
        max_size = int(self.max_sizes[idx])
        return Buffer(self.ids[idx], int(self.sizes[idx]), int(self.starts[idx]),
                      int(self.ends[idx]), int(self.alignments[idx]),
                      None if pinned == NO_OFFSET else pinned, self.allowed_regions[idx],
                      self.kinds[idx], None if max_size == self.sizes[idx] else max_size)

    @property
    def buffers(self) -> Iterator[Buffer]:
        """Each buffer as a `Buffer` row, in problem order (built on demand: O(n))."""
        return (self.buffer(i) for i in range(len(self)))

    @property
    def horizon(self) -> int:
        """One past the last step any buffer is live."""
        return int(self.ends.max()) if len(self) else 0

    @cached_property
    def alias_groups(self) -> tuple[np.ndarray, np.ndarray]:
        """Groups tied together by mandatory aliases: ``(root, delta)`` per buffer.

        ``offset[i] == offset[root[i]] + delta[i]`` in every valid plan; a buffer
        without aliases is its own root with delta 0. Raises `ProblemError` when
        a cycle of aliases asks for two different deltas.
        """
        mandatory = np.flatnonzero(~self.alias_optional)
        root, delta, contradicting = alias_components(self, mandatory)
        if len(contradicting):
            k = int(contradicting[0])
            src, dst = int(self.alias_src[k]), int(self.alias_dst[k])
            self._fail(dst, f"alias cycle contradicts itself: {self.ids[dst]!r} cannot sit "
                            f"{self.alias_delta[k]} bytes after {self.ids[src]!r} and keep "
                            f"its other aliases")
        return root, delta

    def replace(self, **changes: Any) -> Problem:
        """A copy with some fields changed (``capacity``, ``name``, ``aliases``, ...).

        Unless ``buffers`` change, the columns are copied as arrays, not as `Buffer`
        rows: O(n) in numpy (60k buffers: 0.05 s instead of 0.7 s)."""
        fields = dict(aliases=self.aliases,
                      conflicts=[(self.ids[a], self.ids[b]) for a, b in self.conflicts],
                      capacity=self.capacity, widths=self.widths, regions=self.regions,
                      name=self.name, source=self.source, steps=self.steps)
        fields.update(changes)
        if "buffers" in fields:
            return Problem(**fields)
        problem = Problem.__new__(Problem)
        problem._init(ids=self.ids, sizes=self.sizes, starts=self.starts, ends=self.ends,
                      alignments=self.alignments, pinned=self.pinned,
                      max_sizes=self.max_sizes, kinds=self.kinds,
                      allowed_regions=self.allowed_regions, **fields)
        return problem


def _steps(steps: Iterable[Step], source: str | None) -> tuple[Step, ...]:
    """The step metadata as a tuple of `Step`, every name a string (else `ProblemError`).

    Checked as whole columns first (C-level passes over the names' types); entry by
    entry only to name the first bad step."""
    steps = tuple(steps)
    if set(map(type, steps)) <= {Step}:
        reads = list(map(attrgetter("reads"), steps))
        writes = list(map(attrgetter("writes"), steps))
        constants = list(map(attrgetter("constants"), steps))
        names = chain(map(attrgetter("name"), steps), map(attrgetter("op"), steps),
                      chain.from_iterable(reads), chain.from_iterable(writes),
                      chain.from_iterable(constants))
        if set(map(type, reads + writes + constants)) <= {tuple} and \
                set(map(type, names)) <= {str}:
            return steps
    checked = []
    for t, step in enumerate(steps):
        if not isinstance(step, Step):
            raise ProblemError(f"steps[{t}]: expected a Step, got {type(step).__name__}",
                               file=source)
        names = (step.name, step.op, *step.reads, *step.writes, *step.constants)
        if not all(isinstance(x, str) for x in names):
            raise ProblemError(f"steps[{t}]: names must be strings", file=source)
        checked.append(Step(step.name, step.op, tuple(step.reads), tuple(step.writes),
                            tuple(step.constants)))
    return tuple(checked)


def _check_pins(problem: Problem, root: np.ndarray, delta: np.ndarray) -> None:
    """Refuse two pinned buffers on shared bytes while both live (or in conflict).

    No plan can move them, so every planner would return an overlap. Members
    of one mandatory alias group, and the two sides of an optional alias the
    pins honour, may share, unless they are in explicit conflict (a conflict
    keeps two buffers apart whatever alias joins them, as the validator reads
    it). A buffer whose mandatory alias group holds a pinned buffer is pinned
    too, by its aliases. First a numpy test
    (`_may_clash`) that no two meet; only when some might (or the pairs are
    too many to list), a sweep over the pinned buffers by start time that
    names them: O(p log p + p * l) for p pinned buffers, l of them live at once
    (seconds for the thousands of pinned obstacles of a large window).
    """
    if (problem.pinned != NO_OFFSET).sum() < 2:
        return
    pinned = _implied_pins(problem.pinned, root, delta)
    held = np.flatnonzero(pinned != NO_OFFSET)
    sizes, ids = problem.sizes, problem.ids

    def pinned_by(i: int) -> str:
        return "pinned" if problem.pinned[i] != NO_OFFSET else "pinned by its aliases"

    linked = {frozenset((int(s), int(d))) for s, d, k, optional in zip(
        problem.alias_src.tolist(), problem.alias_dst.tolist(), problem.alias_delta.tolist(),
        problem.alias_optional.tolist(), strict=True)
        if optional and pinned[d] != NO_OFFSET and pinned[d] == pinned[s] + k}
    explicit = {frozenset(pair) for pair in problem.conflicts.tolist()}

    def meet(i: int, j: int) -> bool:
        return pinned[i] < pinned[j] + sizes[j] and pinned[j] < pinned[i] + sizes[i]

    def clash(i: int, j: int) -> bool:
        return meet(i, j) and root[i] != root[j] and frozenset((i, j)) not in linked

    order = held[np.argsort(problem.starts[held], kind="stable")].tolist()
    live: list[int] = []
    if not _may_clash(problem, pinned, held, root, linked):
        order = []  # no two live pinned buffers meet: nothing for the sweep to name
    for i in order:
        live = [j for j in live if problem.ends[j] > problem.starts[i]]
        for j in live:
            if clash(i, j):
                problem._fail(i, f"{pinned_by(i)} where {pinned_by(j)} {ids[j]!r} is, "
                                 f"while both are live")
        live.append(i)
    for pair in explicit:
        i, j = sorted(pair)
        if pinned[i] != NO_OFFSET and pinned[j] != NO_OFFSET and meet(i, j):
            problem._fail(j, f"{pinned_by(j)} where {pinned_by(i)} {ids[i]!r} is, and the two "
                             f"conflict")


PIN_PAIRS = 4_000_000  # at most this many pairs of pinned buffers listed by `_may_clash`


def _may_clash(problem: Problem, pinned: np.ndarray, held: np.ndarray, root: np.ndarray,
               linked: set[frozenset]) -> bool:
    """Whether two of the pinned buffers ``held`` might be live together on shared bytes
    (True also when the pairs overlapping in time, and those in address, number more
    than `PIN_PAIRS`): the pairs overlapping in the dimension with fewer of them, listed
    by one sorted run per buffer, checked in the other; O(p log p + pairs)."""
    spans = ((problem.starts[held], problem.ends[held]),  # a zero size counts as one byte
             (pinned[held], pinned[held] + np.maximum(problem.sizes[held], 1)))
    runs = []
    for lo, hi in spans:
        order = np.argsort(lo, kind="stable")
        last = np.searchsorted(lo[order], hi[order], side="left")
        runs.append((order, np.maximum(last - np.arange(len(order)) - 1, 0)))
    listed = int(np.argmin([counts.sum() for _, counts in runs]))
    order, counts = runs[listed]
    if counts.sum() > PIN_PAIRS:
        return True
    a = np.repeat(np.arange(len(order)), counts)
    b = a + 1 + (np.arange(len(a)) - np.repeat(np.cumsum(counts) - counts, counts))
    a, b = order[a], order[b]
    lo, hi = spans[1 - listed]
    meet = (lo[a] < hi[b]) & (lo[b] < hi[a]) & (root[held[a]] != root[held[b]])
    pairs = {(int(x), int(y)) for x, y in zip(held[a[meet]].tolist(), held[b[meet]].tolist(),
                                               strict=True)}
    return any(frozenset(pair) not in linked for pair in pairs)


def _implied_pins(pinned: np.ndarray, root: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """Per buffer its pinned offset, or the one its mandatory alias group's pin implies
    (``offset = offset[root] + delta``), else `NO_OFFSET`: O(n)."""
    held = np.flatnonzero(pinned != NO_OFFSET)
    root_at = np.zeros(len(pinned), np.int64)
    root_pinned = np.zeros(len(pinned), bool)
    root_at[root[held]], root_pinned[root[held]] = pinned[held] - delta[held], True
    implied = np.where(root_pinned[root], root_at[root] + delta, NO_OFFSET)
    return np.where(pinned != NO_OFFSET, pinned, implied)


def _check_sharing(problem: Problem, root: np.ndarray, delta: np.ndarray) -> None:
    """Refuse an explicit conflict that mandatory aliases contradict: O(c).

    Two buffers of one mandatory alias group sit at fixed distances; when
    their byte ranges overlap there, no plan can keep them apart. (A conflict
    between the two sides of an optional alias only means that the alias
    cannot be taken: conflicts hold whatever the aliases say.)
    """
    sizes = problem.sizes
    for a, b in problem.conflicts.tolist():
        if root[a] == root[b] and delta[a] < delta[b] + sizes[b] \
                and delta[b] < delta[a] + sizes[a]:
            problem._fail(a, f"conflicts with {problem.ids[b]!r}, but mandatory aliases put "
                             f"the two on shared bytes")


def alias_components(problem: Problem, aliases) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Weighted union-find over the aliases numbered ``aliases``, taken in that order.

    Returns ``(root, delta, contradicting)``: per buffer its group's root and
    ``offset[i] - offset[root[i]]``, and the aliases that contradict the ones
    before them (left out of the groups). O((n + a) log n) with path halving.
    """
    n = len(problem)
    if len(aliases) == 0:
        return _readonly(np.arange(n)), _readonly(np.zeros(n)), _readonly([])
    aliases = np.asarray(aliases, np.int64)
    edges = (problem.alias_src[aliases], problem.alias_dst[aliases],
             problem.alias_delta[aliases])
    found = _compiled_union_find(n, *edges)
    root, to_root, contradicting = found if found is not None else \
        union_find(n, zip(*(column.tolist() for column in edges), strict=True))
    return (_readonly(root), _readonly(to_root),
            _readonly(aliases[np.asarray(contradicting, np.int64)]))


def _compiled_union_find(n: int, a: np.ndarray, b: np.ndarray, d: np.ndarray
                         ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """`union_find` of the edges ``(a[j], b[j], d[j])`` in C (``memplan/_union_find.c``: the
    same steps, the same roots), or None where it is not built or a difference would pass
    int64 (the Python loop then)."""
    if _union_find_kernel is None:
        return None
    try:
        found = _union_find_kernel(n, *(np.ascontiguousarray(x, np.int64) for x in (a, b, d)))
    except OverflowError:
        return None
    root, to_root, contradicting = (np.frombuffer(part, np.int64) for part in found)
    return root, to_root, contradicting


def union_find(n: int, edges) -> tuple[list[int], list[int], list[int]]:
    """Components of ``n`` items joined by ``edges`` ``(a, b, d)``: ``x[b] == x[a] + d``.

    The one union-find of the package (the validator keeps its own, to stay
    independent); `alias_components` runs its compiled twin when it is built.
    Returns per item its component's root and ``x[i] - x[root]``, and the
    positions of the edges that contradict the ones before them (left out).
    Use ``d = 0`` for plain connectivity. O((n + e) log n) with path halving.
    """
    parent = list(range(n))
    to_parent = [0] * n  # x[i] - x[parent[i]]

    def find(i: int) -> tuple[int, int]:
        total = 0
        while parent[i] != i:
            grand = parent[i]
            if parent[grand] != grand:  # path halving keeps chains short
                to_parent[i] += to_parent[grand]
                parent[i] = parent[grand]
                continue
            total += to_parent[i]
            i = grand
        return i, total

    contradicting = []
    for j, (a, b, d) in enumerate(edges):
        (ra, da), (rb, db) = find(a), find(b)
        if ra == rb:
            if db != da + d:
                contradicting.append(j)
            continue
        parent[rb] = ra  # x[rb] = x[b] - db = x[a] + d - db
        to_parent[rb] = da + d - db
    resolved = [find(i) for i in range(n)]
    return [r for r, _ in resolved], [d for _, d in resolved], contradicting


def check_single_region(problem: Problem) -> None:
    """Refuse a problem whose buffers may not go to region 0, for planners of one arena."""
    if not problem.regions:
        return
    default = problem.regions[0].name
    for idx, allowed in enumerate(problem.allowed_regions):
        if allowed is not None and default not in allowed:
            raise ProblemError(f"may not use region {default!r}, and this planner plans a "
                               f"single region; use a regions-aware planner", file=problem.source,
                               buffer=problem.ids[idx])
