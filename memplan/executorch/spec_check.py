"""ExecuTorch's storage check of a planned graph, as one sweep over time instead of all pairs.

Why: ExecuTorch's ``Verifier.verify_storage_reuse`` compares every pair of
planned TensorSpecs: O(specs^2), tens of seconds on an LLM-sized graph, and
its default pass never runs it (only an algorithm named ``greedy`` is
checked). memplan's pass checks every graph it plans; this module proves what
the Verifier proves at the cost of memplan's validator.

What the Verifier proves, and so `check_storage` (``specs`` as the Verifier
collects them: constants left out, inputs, outputs and mutable buffers as the
pass allocates them):

- every two specs agree on whether ``mem_obj_id`` is set;
- in one ``mem_id`` every spec has an offset, a whole number >= 0;
- two specs whose bytes ``[offset, offset + allocated_memory)`` meet in one
  ``mem_id`` have the same ``mem_obj_id``;
- two specs whose bytes meet are not live together (lifetimes are node
  indices, inclusive at both ends; ``first > last`` is empty), unless one
  lives in the other's storage (``storage_base``, followed to its root) or
  the pass allows it (``allow_lifetime_and_storage_overlap``).

Steps, per ``mem_id``:

::

    offset ^      +----+          a sweep over time: at each node index the
           |  +---|-b--|--+       specs that start join the live set, kept as
           |  | a +----+  |       components (maximal runs of bytes that live
           |  +-----------+       specs cover, sorted by offset); a new spec
           +-------------------> node  meets only the components its bytes
                                       touch, and in them only the members it
                                       overlaps (b in a: allowed when a is b's
                                       storage base)

- memory objects: the specs sorted by offset; each run of meeting byte
  ranges holds one ``mem_obj_id``;
- storage reuse: the sweep above; a spec leaves the live set after its last
  node (inclusive: one ending at node 5 meets one starting there).

Cost: O(n log n) for n specs, plus per spec the members of the components it
meets (specs that share bytes while live: a tensor and its in-place results,
a few) and the list moves of the live set (memmove). The Verifier's own
check stays one call away (``verify="executorch"``).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from memplan.errors import InvalidPlanError, ProblemError

MODES = ("memplan", "executorch")  # whose storage check: the sweep, or the Verifier's pairs

Placed = tuple[Any, int]  # (mem_id, offset) as the plan states them


def check_mode(verify: bool | str | None) -> str | None:
    """``verify`` as a storage check's name: True -> "memplan", False/None -> None;
    anything else but `MODES` refused (`ProblemError`)."""
    if verify is True:
        return "memplan"
    if verify is False or verify is None:
        return None
    if verify not in MODES:
        raise ProblemError(f"verify must be True, False, 'memplan' or 'executorch', "
                           f"got {verify!r}")
    return verify


def spec_namer(graph_module: Any) -> Callable[[Any], str]:
    """A spec's name for a message (the node that produces it), the graph's names read
    on the first call only: a passing check never pays for them."""
    names: dict = {}

    def name(spec: Any) -> str:
        if not names:
            from memplan.executorch.executorch_specs import spec_names

            names.update(spec_names(graph_module) or {None: ""})
        return repr(names[spec]) if spec in names else "a tensor"
    return name


class _Component:
    """A maximal run of bytes ``[lo, hi)`` covered by live specs that meet."""

    __slots__ = ("lo", "hi", "members")

    def __init__(self, lo: int, hi: int, members: list):
        self.lo, self.hi, self.members = lo, hi, members


def check_storage(specs: Iterable[Any], *, allow_overlap: bool = False,
                  placed: Mapping[Any, Any] | None = None,
                  name: Callable[[Any], str] = lambda spec: "a tensor") -> int:
    """Check ``specs`` as ``Verifier.verify_storage_reuse`` does (see the module
    docstring); `InvalidPlanError` naming the first two specs at fault.

    ``placed``: per spec, an object with ``mem_id``, ``mem_offset`` and ``mem_obj_id``
    (ExecuTorch's ``SpecAllocResult``) read instead of the spec's own (an algorithm's
    result before the suite writes it); ``name``: a spec's name for the messages.
    Returns the number of specs checked."""
    rows = []  # (spec, mem_id, offset, mem_obj_id)
    for spec in dict.fromkeys(specs):
        where = spec if placed is None or spec not in placed else placed[spec]
        rows.append((spec, where.mem_id, where.mem_offset, where.mem_obj_id))
    if len({obj is None for *_, obj in rows}) > 1:
        unset = next(r for r in rows if r[3] is None)
        raise InvalidPlanError([f"{name(unset[0])} has no mem_obj_id while others have one "
                                f"(ExecuTorch's Verifier asks all or none)"])
    arenas: dict[Any, list] = {}
    for row in rows:
        arenas.setdefault(row[1], []).append(row)
    for mem_id, members in arenas.items():
        if len(members) < 2:
            continue  # the Verifier compares pairs: one spec alone is not looked at
        for spec, _, offset, _ in members:
            if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
                raise InvalidPlanError([f"{name(spec)} in mem_id {mem_id} has offset "
                                        f"{offset!r}, not a whole number >= 0"])
            if spec.allocated_memory < 0:
                raise InvalidPlanError([f"{name(spec)} allocates {spec.allocated_memory} "
                                        f"bytes"])
        _check_objects(mem_id, members, name)
        _check_reuse(mem_id, members, allow_overlap, name)
    return len(rows)


def _check_objects(mem_id: Any, members: list, name: Callable) -> None:
    """Specs whose bytes meet share one ``mem_obj_id``: one sorted pass per arena."""
    order = sorted((r for r in members if r[0].allocated_memory > 0), key=lambda r: r[2])
    end, first = -1, None
    for row in order:
        spec, _, offset, obj = row
        if offset < end and obj != first[3]:
            raise InvalidPlanError([f"{name(first[0])} (mem_obj_id {first[3]}) and "
                                    f"{name(spec)} (mem_obj_id {obj}) share bytes in mem_id "
                                    f"{mem_id} but not a memory object"])
        if offset >= end:
            first = row
        end = max(end, offset + spec.allocated_memory)


def _chain(spec: Any) -> set:
    """``spec`` and every spec its storage lives in (its ``storage_base``, followed)."""
    seen = set()
    while spec is not None:
        if spec in seen:
            raise InvalidPlanError(["a cycle of storage_base specs"])
        seen.add(spec)
        spec = spec.storage_base
    return seen


def _check_reuse(mem_id: Any, members: list, allow_overlap: bool, name: Callable) -> None:
    """No two specs live together on shared bytes (see the module docstring)."""
    if allow_overlap:
        return
    events, timeless = [], []
    for spec, _, offset, _ in members:
        size = spec.allocated_memory
        if size <= 0:
            continue  # no bytes: meets nothing
        first, last = spec.lifetime
        if first is None or last is None:
            timeless.append((spec, offset))
            continue
        if first <= last:
            events.append((first, 0, offset, id(spec), spec))  # starts before ends at a node
            events.append((last, 1, offset, id(spec), spec))
    for spec, offset in timeless:  # the Verifier asserts a lifetime once bytes are shared
        for other, _, at, _ in members:
            if other is not spec and other.allocated_memory > 0 and at < offset + \
                    spec.allocated_memory and offset < at + other.allocated_memory:
                raise InvalidPlanError([f"{name(spec)} has no lifetime and shares bytes "
                                        f"with {name(other)} in mem_id {mem_id}"])
    events.sort(key=lambda e: e[:4])
    los: list[int] = []  # the live components' lo, sorted
    parts: list[_Component] = []  # in that order
    home: dict[Any, _Component] = {}
    chains: dict[Any, set] = {}

    def chain(spec):
        if spec not in chains:
            chains[spec] = _chain(spec)
        return chains[spec]

    for _, ending, lo, _, spec in events:
        hi = lo + spec.allocated_memory
        if ending:
            _leave(spec, home, los, parts)
            continue
        k = max(bisect_right(los, lo) - 1, 0)
        met = []
        while k < len(parts) and parts[k].lo < hi:
            part = parts[k]
            if part.hi > lo:
                met.append(k)
                for other, o_lo in part.members:
                    if o_lo < hi and lo < o_lo + other.allocated_memory and \
                            spec not in chain(other) and other not in chain(spec):
                        raise InvalidPlanError([
                            f"{name(other)} and {name(spec)} share bytes in mem_id {mem_id} "
                            f"while both live: [{o_lo}, {o_lo + other.allocated_memory}) at "
                            f"nodes {list(other.lifetime)}, [{lo}, {hi}) at nodes "
                            f"{list(spec.lifetime)}"])
            k += 1
        members_ = [(spec, lo)]
        for k in met:
            members_ += parts[k].members
        joined = _Component(min([lo, *(parts[k].lo for k in met)]),
                            max([hi, *(parts[k].hi for k in met)]), members_)
        if met:
            del los[met[0]:met[-1] + 1], parts[met[0]:met[-1] + 1]
        at = bisect_right(los, joined.lo)
        los.insert(at, joined.lo)
        parts.insert(at, joined)
        for member, _ in members_:
            home[member] = joined


def _leave(spec: Any, home: dict, los: list[int], parts: list[_Component]) -> None:
    """``spec`` leaves the live set; its component splits into what still meets."""
    part = home.pop(spec)
    k = bisect_right(los, part.lo) - 1
    while parts[k] is not part:  # components never share a lo, but be exact
        k -= 1
    del los[k], parts[k]
    rest = sorted((m for m in part.members if m[0] is not spec), key=lambda m: m[1])
    pieces: list[_Component] = []
    for member in rest:
        lo, hi = member[1], member[1] + member[0].allocated_memory
        if pieces and lo < pieces[-1].hi:
            pieces[-1].hi = max(pieces[-1].hi, hi)
            pieces[-1].members.append(member)
        else:
            pieces.append(_Component(lo, hi, [member]))
    for piece in reversed(pieces):
        los.insert(k, piece.lo)
        parts.insert(k, piece)
        for member, _ in piece.members:
            home[member] = piece
