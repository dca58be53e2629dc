"""Operator order: choose the schedule of an ONNX graph that lowers the peak.

The order a model file lists its nodes in is one valid topological order of
many. On graphs with branches (Inception blocks, dense blocks, skip
connections, parallel heads) another order keeps far fewer bytes live at
once, and every planner's lower bound is the live load *under the order*.
`reorder` searches the orders, writes the model in the best one found, and
returns the problem of that order for any planner.

Steps:

- analyse the model under the file's order (`memplan.onnx.onnx`): the runtime
  steps (constant nodes are folded and stay first), which step must follow
  which (a step reads what another writes; nodes of other domains and random
  nodes keep their relative order), and the storage *blocks*: the alias
  groups of the problem, each counted as its extent from its first write to
  its last read (graph inputs from the start, outputs to the end);
- **fast**: memory-aware list scheduling (at each step run the ready operator
  that allocates the least minus what it frees; ties go to a successor of the
  operator just run, then to the file's order; then the same with seeded
  random ties), then local search that moves one operator anywhere between
  its last predecessor and its first successor while the peak, then the
  total live bytes x steps, do not grow, until the peak meets the most bytes
  one step touches (no order goes lower); the random starts stop after a
  quarter of its time, the search at its end, both counted in CPU seconds of
  the calling thread (and never past the time limit on the wall clock); the
  file's order is kept unless the true lower bound of the new order is lower;
- **exact**: CP-SAT over operator positions (all different, precedences)
  with each block's lifetime the minimum and maximum of its steps' positions,
  a cumulative of the block extents under the peak, and one offset per block
  in a NoOverlap2D over the variable lifetimes (order and layout at once);
  warm-started from the fast order. Its bound is proven over every order and
  layout of the mandatory alias groups: a model planned without optional
  in-place aliases (``inplace=False``). With in-place aliases its bound is
  only reported, not claimed (a taken in-place alias saves bytes the model
  does not count). Graphs of more than `WINDOW_STEPS` steps get half the
  time for the whole model, then, unless it proved its answer, the rest for
  windows of `WINDOW` steps around the peak (the other steps held);
  ``exact`` hands over from the fast order after `FAST_SHARE` of the limit,
  and from the whole model to the windows, in CPU seconds (per CP-SAT
  worker; `memplan.budget`), so that a busy machine slows the
  stages without moving their hand-overs; the time limit is kept on the wall
  clock from the call;
- write the model with its runtime nodes in the new order and build its
  problem; plan it with any planner (`memplan.plan_with`).

Cost: the fast search is O(iterations * (n + b)) for n steps and b blocks
(one numpy evaluation per move); the exact model has n position variables,
2b lifetime variables and b offsets, and its search is exponential,
bounded by the time limit. Limits: the nodes inside control-flow subgraphs
keep their order (the node is one step).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from memplan.bounds import lower_bound
from memplan.budget import Budget, past, to_deadline
from memplan.errors import ProblemError, naming, renamed_keyword
from memplan.groups import group_congruence
from memplan.limits import check_time_limit, check_workers
from memplan.onnx.onnx_options import OnnxOptions
from memplan.problem import Problem, alias_components
from memplan.registry import plan_with
from memplan.shares import (
    FAST_SHARE,
    LEAST_LEFT,
    LEAST_SECONDS,
    ORDER_MODEL_SHARE,
    STARTS_SHARE,
    WINDOW_LEAST_CPU,
    WINDOW_SHARE,
)

if TYPE_CHECKING:  # onnx is imported when a model is reordered, not with the command line
    from onnx import ModelProto

METHODS = ("fast", "exact")
RANDOM_STARTS = 8  # fast: list schedules with seeded random ties after the greedy one
WINDOW_STEPS = 200  # exact: graphs with more steps are improved one window of steps at a time
WINDOW = 48  # exact on large graphs: steps free to move in one window


@dataclass(frozen=True, eq=False)
class Dependencies:
    """A model's runtime steps, their precedences and the blocks they start and end.

    Step ``i`` is the ``i``-th runtime node in the file's order. A block
    starts at the earliest position of its ``start`` steps and ends one past
    the latest of its ``end`` steps (CSR arrays); the virtual steps ``n``
    (position 0) and ``n + 1`` (position n - 1) pin graph inputs to the start
    and outputs to the end.
    """

    labels: list[str]  # per step: the node, as errors name it
    preds: list[list[int]]  # per step: the steps it must follow
    succs: list[list[int]]
    extent: np.ndarray  # per block: bytes
    start_ptr: np.ndarray
    start_steps: np.ndarray
    end_ptr: np.ndarray
    end_steps: np.ndarray
    members: list[np.ndarray]  # per block: its buffers
    rel: np.ndarray  # per buffer: offset above its block's base

    @property
    def n(self) -> int:
        return len(self.labels)

    def lifetimes(self, position: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per block ``(start, end)`` under the order given as a position per step; O(n + b)."""
        at = np.concatenate([position, [0, max(self.n - 1, 0)]])
        start = np.minimum.reduceat(at[self.start_steps], self.start_ptr[:-1])
        end = np.maximum.reduceat(at[self.end_steps], self.end_ptr[:-1]) + 1
        return start, end

    def step_bound(self) -> int:
        """A bound of every order: the most bytes one step touches (its blocks meet there)."""
        touched = np.zeros(self.n + 2, np.int64)
        for b in range(len(self.extent)):
            steps = np.union1d(self.start_steps[self.start_ptr[b]:self.start_ptr[b + 1]],
                               self.end_steps[self.end_ptr[b]:self.end_ptr[b + 1]])
            touched[steps] += self.extent[b]
        return int(touched[:self.n].max()) if self.n else 0

    def load(self, order: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(live bytes per position, start, end)`` of the blocks under ``order``; O(n + b)."""
        position = np.empty(self.n, np.int64)
        position[order] = np.arange(self.n)
        start, end = self.lifetimes(position)
        change = np.bincount(start, self.extent, self.n + 1) - \
            np.bincount(end, self.extent, self.n + 1)
        return np.cumsum(change), start, end

    def cost(self, order: np.ndarray) -> tuple[int, int]:
        """``(peak, bytes x steps)`` of the blocks under ``order`` (steps in run order)."""
        load, start, end = self.load(order)
        return int(load.max()), int((self.extent * (end - start)).sum())

    def bases(self, offsets: np.ndarray) -> np.ndarray:
        """Per block the base offset that the per-buffer ``offsets`` give it."""
        first = np.array([m[0] for m in self.members], np.int64)
        return offsets[first] - self.rel[first]


def dependencies(problem: Problem, graph, *, optional_taken: bool) -> Dependencies:
    """The `Dependencies` of ``graph`` (`onnx_graph.Graph`) and its problem in file order.

    Blocks are the alias groups, with the optional aliases taken
    (``optional_taken``: the fast search's estimate, which is the lower
    bound's view of them) or left out (the exact model's blocks, which it
    can place exactly).
    """
    from memplan.onnx.onnx_graph import NONDETERMINISTIC, STANDARD_DOMAINS, describe

    n = len(graph.steps)
    preds: list[set[int]] = [set() for _ in range(n)]
    for name, readers in graph.readers.items():
        if name in graph.producer:
            for reader in readers:
                preds[reader].add(graph.producer[name])
    pinned = [s for s, node in enumerate(graph.steps)
              if node.domain not in STANDARD_DOMAINS or node.op_type in NONDETERMINISTIC]
    for before, after in zip(pinned, pinned[1:], strict=False):
        preds[after].add(before)  # side effects and random streams keep their order
    succs: list[list[int]] = [[] for _ in range(n)]
    for step, before in enumerate(preds):
        for b in before:
            succs[b].append(step)

    order = np.argsort(problem.alias_optional, kind="stable") if optional_taken else \
        np.flatnonzero(~problem.alias_optional)
    root, delta, _ = alias_components(problem, order)
    roots, block_of = np.unique(root, return_inverse=True)
    low = np.full(len(roots), np.iinfo(np.int64).max)
    np.minimum.at(low, block_of, delta)
    rel = delta - low[block_of]
    extent = np.zeros(len(roots), np.int64)
    np.maximum.at(extent, block_of, rel + problem.sizes)
    zero, last = n, n + 1
    starts: list[set[int]] = [set() for _ in roots]
    ends: list[set[int]] = [set() for _ in roots]
    for idx, name in enumerate(problem.ids):
        b = int(block_of[idx])
        kind = problem.kinds[idx]
        step = int(problem.starts[idx])  # file order: positions are step numbers
        starts[b].add(zero if kind in ("input", "weight") else step)
        ends[b].update(graph.readers.get(name, ()))
        ends[b].add(step if kind != "input" else zero)
        if kind in ("output", "weight"):
            ends[b].add(last)
    start_ptr, start_steps = _csr(starts)
    end_ptr, end_steps = _csr(ends)
    members = np.split(np.argsort(block_of, kind="stable"),
                       np.cumsum(np.bincount(block_of, minlength=len(roots)))[:-1])
    return Dependencies([describe(node, graph.positions[s]) for s, node in enumerate(graph.steps)],
                        [sorted(p) for p in preds], succs, extent, start_ptr, start_steps,
                        end_ptr, end_steps, members, rel)


def _csr(sets: list[set[int]]) -> tuple[np.ndarray, np.ndarray]:
    ptr = np.zeros(len(sets) + 1, np.int64)
    np.cumsum([len(s) for s in sets], out=ptr[1:])
    values = np.fromiter((v for s in sets for v in sorted(s)), np.int64, int(ptr[-1]))
    return ptr, values


def list_schedule(deps: Dependencies, rng: np.random.Generator | None = None) -> np.ndarray:
    """One memory-aware topological order (steps in run order); O(n * ready * degree).

    Runs, among the ready steps, the one whose new blocks need the fewest
    bytes minus the bytes of the blocks it ends; ties: a successor of the step
    just run (finish a branch before opening another), then the file's order,
    or, with ``rng``, a random choice.
    """
    n = deps.n
    started_by: list[list[int]] = [[] for _ in range(n + 2)]
    ended_by: list[list[int]] = [[] for _ in range(n + 2)]
    for b in range(len(deps.extent)):
        for s in deps.start_steps[deps.start_ptr[b]:deps.start_ptr[b + 1]].tolist():
            started_by[s].append(b)
        for s in deps.end_steps[deps.end_ptr[b]:deps.end_ptr[b + 1]].tolist():
            ended_by[s].append(b)
    started = np.zeros(len(deps.extent), bool)
    started[started_by[n]] = True
    waiting = np.diff(deps.end_ptr).astype(np.int64)  # end steps not yet run, per block
    held = np.zeros(len(deps.extent), bool)
    held[ended_by[n + 1]] = True  # outputs never end
    for b in ended_by[n]:
        waiting[b] -= 1
    missing = [len(p) for p in deps.preds]
    ready = [s for s in range(n) if missing[s] == 0]
    noise = rng.random(n) if rng is not None else np.arange(n) / max(n, 1)
    order, last = [], -1
    extent = deps.extent

    def score(s: int, last: int) -> tuple:
        grow = sum(int(extent[b]) for b in started_by[s] if not started[b])
        free = sum(int(extent[b]) for b in ended_by[s] if waiting[b] == 1 and not held[b])
        return (grow - free, 0 if last in deps.preds[s] else 1, noise[s])

    while ready:
        step = min(ready, key=lambda s, last=last: score(s, last))
        ready.remove(step)
        order.append(step)
        last = step
        started[started_by[step]] = True
        for b in ended_by[step]:
            waiting[b] -= 1
        for s in deps.succs[step]:
            missing[s] -= 1
            if missing[s] == 0:
                ready.append(s)
    if len(order) != n:
        raise ProblemError("the operators' dependencies form a cycle")
    return np.array(order, np.int64)


def improve(deps: Dependencies, order: np.ndarray, until: Callable[[], bool],
            rng: np.random.Generator, iterations: int) -> tuple[np.ndarray, dict[str, Any]]:
    """Local search: move one step within its window while (peak, area) does not grow, until
    ``until()`` says the time is up."""
    n = deps.n
    best = deps.cost(order)
    position = np.empty(n, np.int64)
    position[order] = np.arange(n)
    moves = accepted = 0
    floor = deps.step_bound()  # no order has a lower peak; at it only the area could improve
    while moves < iterations and not until() and n > 1 and best[0] > floor:
        moves += 1
        step = int(rng.integers(n))
        lo = max((int(position[p]) + 1 for p in deps.preds[step]), default=0)
        hi = min((int(position[s]) - 1 for s in deps.succs[step]), default=n - 1)
        if hi <= lo:
            continue
        target = int(rng.integers(lo, hi + 1))
        if target == position[step]:
            continue
        candidate = np.insert(np.delete(order, position[step]), target, step)
        cost = deps.cost(candidate)
        if cost <= best:
            order, best = candidate, cost
            position[order] = np.arange(n)
            accepted += 1
    return order, {"moves": moves, "accepted": accepted}


def fast_order(deps: Dependencies, *, budget: Budget, seed: int,
               iterations: int = 20000) -> tuple[np.ndarray, dict[str, Any]]:
    """The best of the list schedules (and the file's order), improved by local search: the
    random starts for `STARTS_SHARE` of the ``budget``'s allowance (CPU seconds of this
    thread; default its limit), the search for the rest, and never past its deadline."""
    deadline, allowance = budget.deadline, budget.allowance()
    rng = np.random.default_rng(seed)
    candidates = [np.arange(deps.n), list_schedule(deps)]
    for _ in range(RANDOM_STARTS):
        if budget.spent() > STARTS_SHARE * allowance or past(deadline):
            break
        candidates.append(list_schedule(deps, rng))
    costs = [deps.cost(c) for c in candidates]
    order = candidates[costs.index(min(costs))]
    order, stats = improve(deps, order, lambda: budget.spent() >= allowance or past(deadline),
                           rng, iterations)
    stats.update(starts=len(candidates), start_costs=[c[0] for c in costs])
    return order, stats


@dataclass
class _OrderModel:
    """The CP-SAT variables of order and layout at once (see `exact_order`)."""

    cp: Any
    position: list  # per step
    start: list  # per block, with end, length, offset and its address interval
    end: list
    length: list
    offset: list
    places: list
    peak: Any


def _order_model(deps: Dependencies, problem: Problem) -> _OrderModel:
    """Positions (all different, after their predecessors); per block a lifetime from the
    min and max of its steps' positions, an aligned offset, one NoOverlap2D over (lifetime x
    address) and a cumulative of the extents under the peak."""
    from ortools.sat.python import cp_model  # imported on first use: it costs a second

    n, total = deps.n, int(deps.extent.sum())
    cp = cp_model.CpModel()
    position = [cp.new_int_var(0, n - 1, f"position[{label}]") for label in deps.labels]
    cp.add_all_different(position)
    for step, before in enumerate(deps.preds):
        for b in before:
            cp.add(position[b] < position[step])
    at = [*position, cp.new_constant(0), cp.new_constant(max(n - 1, 0))]
    model = _OrderModel(cp, position, [], [], [], [], [],
                        cp.new_int_var(deps.step_bound(), total, "peak"))
    spans = []
    for b, members in enumerate(deps.members):
        name, extent = problem.ids[int(members[0])], int(deps.extent[b])
        start = cp.new_int_var(0, max(n - 1, 0), f"start[{name}]")
        end = cp.new_int_var(1, max(n, 1), f"end[{name}]")
        cp.add_min_equality(start, [at[s] for s in
                                    deps.start_steps[deps.start_ptr[b]:deps.start_ptr[b + 1]]])
        cp.add_max_equality(end, [at[s] + 1 for s in
                                  deps.end_steps[deps.end_ptr[b]:deps.end_ptr[b + 1]]])
        length = cp.new_int_var(1, max(n, 1), f"length[{name}]")
        spans.append(cp.new_interval_var(start, length, end, f"lifetime[{name}]"))
        residue, modulus = group_congruence(problem, members, deps.rel[members])
        offset = cp.new_int_var(0, max(0, total - extent), f"offset[{name}]")
        if modulus > 1:
            quotient = cp.new_int_var(0, total // modulus, f"k[{name}]")
            cp.add(offset == modulus * quotient + residue)
        model.places.append(cp.new_fixed_size_interval_var(offset, extent, f"bytes[{name}]"))
        cp.add(offset + extent <= model.peak)
        model.start.append(start)
        model.end.append(end)
        model.length.append(length)
        model.offset.append(offset)
    cp.add_no_overlap_2d(spans, model.places)
    cp.add_cumulative(spans, [int(e) for e in deps.extent], model.peak)
    cp.minimize(model.peak)
    return model


def _add_hint(model: _OrderModel, deps: Dependencies, order: np.ndarray,
              offsets: np.ndarray | None) -> None:
    """A complete hint: the positions and lifetimes of ``order`` and, given, its layout."""
    position = np.empty(deps.n, np.int64)
    position[order] = np.arange(deps.n)
    start, end = deps.lifetimes(position)
    for step, var in enumerate(model.position):
        model.cp.add_hint(var, int(position[step]))
    for b in range(len(deps.extent)):
        model.cp.add_hint(model.start[b], int(start[b]))
        model.cp.add_hint(model.end[b], int(end[b]))
        model.cp.add_hint(model.length[b], int(end[b] - start[b]))
    if offsets is not None:
        bases = deps.bases(offsets)
        for b, var in enumerate(model.offset):
            model.cp.add_hint(var, int(bases[b]))
        model.cp.add_hint(model.peak, int((bases + deps.extent).max()))


def exact_order(deps: Dependencies, problem: Problem, hint: np.ndarray,
                hint_offsets: np.ndarray | None, *, budget: Budget, seed: int,
                threads: int) -> tuple[np.ndarray, np.ndarray | None, dict[str, Any]]:
    """CP-SAT over positions and block offsets (`_order_model`): ``(order, offsets, stats)``.

    Minimises the peak, warm-started from the order ``hint`` and a plan of it
    (``hint_offsets``, per buffer of ``problem``); settled at once when that
    plan meets the step bound. ``offsets`` (per buffer, None when no layout is
    known) fit the order and leave the optional aliases untaken. The ``budget``'s
    allowance: CPU seconds per worker (default its limit), half of them for the
    whole model on a windowed graph; its deadline (wall) ends every run.
    """
    from ortools.sat.python import cp_model

    from memplan.solver.cp_params import cp_solver
    from memplan.solver.cpu_budget import CpuCap

    hint_peak, _ = deps.cost(hint)
    floor = deps.step_bound()
    if hint_offsets is not None:
        hint_layout_peak = _layout_peak(deps, hint_offsets)
        if hint_layout_peak <= floor:  # no order and layout can do better: proven at once
            return hint, hint_offsets, {"status": "OPTIMAL", "bound": floor,
                                        "hint_peak": hint_peak, "branches": 0,
                                        "peak": hint_layout_peak, "settled_by": "step bound"}
    deadline, allowance = budget.deadline, budget.allowance()
    windowed = deps.n > WINDOW_STEPS and hint_offsets is not None
    model = _order_model(deps, problem)
    _add_hint(model, deps, hint, hint_offsets)
    solver = cp_solver(threads=threads, seed=seed,
                       seconds=max(LEAST_SECONDS, to_deadline(deadline)))
    with CpuCap(solver, _cpu_workers(threads), allowance * ORDER_MODEL_SHARE if windowed else
                None) as cap:
        status = solver.solve(model.cp)  # large: the rest goes to windows
    stats = {"status": solver.status_name(status),
             "bound": max(floor, int(solver.best_objective_bound)),
             "hint_peak": hint_peak, "branches": solver.num_branches}
    order, offsets = hint, hint_offsets  # the warm start is still a layout of its order
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        order = np.argsort([solver.value(p) for p in model.position], kind="stable")
        offsets = np.empty(len(problem), np.int64)
        for b, members in enumerate(deps.members):
            offsets[members] = solver.value(model.offset[b]) + deps.rel[members]
        stats["peak"] = int(solver.objective_value)
    if windowed and status != cp_model.OPTIMAL and offsets is not None:
        order, offsets, more = _improve_windows(
            deps, problem, order, offsets, stats["bound"], seed=seed, threads=threads,
            budget=Budget.of_limit(to_deadline(deadline), cpu=allowance - cap.spent))
        stats.update(more, status=more["status"] if more["status"] == "OPTIMAL"
                     else stats["status"])
    return order, offsets, stats


def _layout_peak(deps: Dependencies, offsets: np.ndarray) -> int:
    return int((deps.bases(offsets) + deps.extent).max())


def _cpu_workers(threads: int) -> int:
    """The CP-SAT threads whose CPU a budget counts (0, CP-SAT's default: one per core)."""
    return threads or os.cpu_count() or 1


def _improve_windows(deps: Dependencies, problem: Problem, order: np.ndarray,
                     offsets: np.ndarray, floor: int, *, budget: Budget, seed: int,
                     threads: int) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """Large graphs: re-solve `WINDOW` steps around the peak at a time, the rest fixed.

    Each window is the whole model (`_order_model`) with every step outside it
    held at its position, warm-started from the current order and layout; a
    better peak is kept; each window's CP-SAT run takes at most `WINDOW_SHARE`
    of the ``budget``'s allowance (CPU seconds per worker, default its limit), and
    1 s at least. Stops at its deadline (wall) or at ``floor`` (the best bound
    proven before; windows prove nothing globally).
    """
    from ortools.sat.python import cp_model

    from memplan.solver.cp_params import cp_solver
    from memplan.solver.cpu_budget import CpuCap

    rng = np.random.default_rng(seed)
    best = _layout_peak(deps, offsets)
    windows = improved = 0
    while best > floor:
        left = to_deadline(budget.deadline)
        if left <= LEAST_LEFT:
            break
        load, _, _ = deps.load(order)
        position = np.empty(deps.n, np.int64)
        position[order] = np.arange(deps.n)
        centre = int(np.argmax(load)) + int(rng.integers(-WINDOW // 4, WINDOW // 4 + 1))
        low = min(max(0, centre - WINDOW // 2), max(0, deps.n - WINDOW))
        model = _order_model(deps, problem)
        for step in order[:low].tolist() + order[low + WINDOW:].tolist():
            model.cp.add(model.position[step] == int(position[step]))
        _add_hint(model, deps, order, offsets)
        solver = cp_solver(threads=threads, seed=seed + windows, seconds=left)
        window_cpu = max(WINDOW_LEAST_CPU, WINDOW_SHARE * budget.allowance())
        with CpuCap(solver, _cpu_workers(threads), window_cpu):
            status = solver.solve(model.cp)
        windows += 1
        if status in (cp_model.OPTIMAL, cp_model.FEASIBLE) and solver.objective_value < best:
            order = np.argsort([solver.value(p) for p in model.position], kind="stable")
            offsets = np.empty(len(problem), np.int64)
            for b, members in enumerate(deps.members):
                offsets[members] = solver.value(model.offset[b]) + deps.rel[members]
            best, improved = int(solver.objective_value), improved + 1
    status = "OPTIMAL" if best <= floor else "FEASIBLE"
    return order, offsets, {"status": status, "bound": floor, "peak": best, "windows": windows,
                            "improved": improved, "settled_by": "windows"}


def _by_ids(values: np.ndarray, source: Problem, target: Problem) -> np.ndarray | None:
    """Per-buffer ``values`` of ``source`` in ``target``'s buffer order (None if ids differ)."""
    index = {name: i for i, name in enumerate(source.ids)}
    if any(name not in index for name in target.ids):
        return None  # control-flow scratch buffers are named by their step
    return np.asarray(values)[[index[name] for name in target.ids]]


@dataclass
class Reordering:
    """A model in a new operator order, its problem, and what the order saves."""

    graph: ModelProto  # the model without its weights' data, runtime nodes in the new order
    problem: Problem  # the problem of the new order (plan it with any planner)
    original: Problem  # the problem of the file's order
    order: list[int]  # node positions in the file, in the new run order (runtime nodes)
    method: str
    seconds: float
    best_bound: int | None = None  # exact: proven bound of the peak over every order and layout
    offsets: np.ndarray | None = None  # exact: a plan of ``problem`` found with the order
    stats: dict[str, Any] = field(default_factory=dict)
    source: Any = None  # the model as given to `reorder`: a path, bytes or a ModelProto

    @property
    def model(self) -> ModelProto:
        """The whole model, weights included, in the new order (parsed anew on each call).

        Planning never needs it; writing or running the reordered model does.
        """
        from onnx import ModelProto

        from memplan.onnx.onnx_graph import load_model

        whole = load_model(self.source)[0]
        constant = self.node_order[:len(self.node_order) - len(self.order)]
        return reordered_model(whole, self.order, constant,
                               copy=isinstance(self.source, ModelProto))

    @property
    def node_order(self) -> list[int]:
        """Every node's position in the file, in the new order: constant nodes first.

        What `memplan.formats.writers.export` (format ``onnx``) takes to write the
        reordered model straight from the file, weights copied in chunks.
        """
        runtime = set(self.order)
        return [p for p in range(len(self.graph.graph.node)) if p not in runtime] + \
            list(self.order)

    @property
    def original_bound(self) -> int:
        """The lower bound under the file's operator order."""
        return lower_bound(self.original)

    @property
    def bound(self) -> int:
        """The lower bound under the new operator order."""
        return lower_bound(self.problem)

    @property
    def saving(self) -> float:
        """The share of the file order's lower bound that the new order saves."""
        before = self.original_bound
        return (before - self.bound) / before if before else 0.0


def reordered_model(model: ModelProto, positions: list[int], constant: list[int], *,
                    copy: bool = True) -> ModelProto:
    """``model`` with its constant nodes first (file order), then the runtime ``positions``.

    ``copy=False`` reorders ``model`` itself (no second copy of its weights).
    """
    from onnx import ModelProto, NodeProto

    result = model
    if copy:
        result = ModelProto()
        result.CopyFrom(model)
    nodes = [NodeProto.FromString(model.graph.node[p].SerializeToString())
             for p in [*constant, *positions]]
    del result.graph.node[:]
    result.graph.node.extend(nodes)
    return result


def reorder(model: str | os.PathLike | bytes | ModelProto, *, method: str = "fast",
            time_limit: float = 10.0, seed: int = 0, threads: int = 0,
            workers: int | None = None, **onnx_options) -> Reordering:
    """Choose the operator order of ``model`` that lowers the peak; see the module docstring.

    ``onnx_options`` are those of `from_onnx` (dims, alignment, inplace, ...).
    The result is never worse than the file's order: the new order is kept
    only when its lower bound (or, exact, its proven layout) is smaller. ``workers``: the
    old name of ``threads`` (deprecated).
    """
    from memplan.onnx.onnx_graph import load_graph

    if workers is not None:  # `threads` has a default (0): the old name replaces it
        threads = renamed_keyword("workers", workers, "threads", threads or None,
                                  where="reorder")

    if method not in METHODS:
        raise ValueError(f"unknown reorder method {method!r}; valid: {', '.join(METHODS)}")
    time_limit = check_time_limit(time_limit, "time_limit", unlimited=False)
    if threads != 0:  # 0: CP-SAT's default
        check_workers(threads, "threads")
    budget = Budget.of_limit(time_limit, cpu=time_limit)  # the wall limit and this thread's CPU
    options = OnnxOptions(**{k: v for k, v in onnx_options.items() if v is not None})
    proto, source = load_graph(model)  # planning reads no weights
    with naming(source):  # the frontend sees a parsed model below: errors name the file here
        result = _reorder(proto, source, options, method=method, budget=budget, seed=seed,
                          threads=threads)
    result.source = model
    return result


def _reorder(proto: ModelProto, source: str | None, options: OnnxOptions, *, method: str,
             budget: Budget, seed: int, threads: int) -> Reordering:
    """`reorder` on the parsed model ``proto`` (``budget``: made with the call, its limit
    the wall seconds and the CPU seconds of this thread)."""
    from memplan.onnx.onnx import from_onnx
    from memplan.onnx.onnx_graph import analyze, bind_dims
    from memplan.onnx.onnx_shapes import infer_shapes

    inferred = infer_shapes(bind_dims(proto, options.dims, source), strict=options.strict,
                            source=source)[0]
    graph = analyze(inferred, source=source)
    original = from_onnx(proto, **vars(options)).replace(source=source)
    if len(original) == 0 or not graph.positions:  # nothing to order by: the file's order
        return Reordering(proto, original, original, list(graph.positions), method,
                          budget.elapsed(), stats={
                              "kept_file_order": True, "note": "no buffers to plan"})
    deps = dependencies(original, graph, optional_taken=True)
    order, stats = fast_order(deps, budget=Budget.of_limit(
        budget.limit - budget.elapsed(),
        cpu=budget.limit * (FAST_SHARE if method == "exact" else 1.0)),
        seed=seed)
    best_bound = offsets = None
    runtime = set(graph.positions)
    constant = [p for p in range(len(proto.graph.node)) if p not in runtime]

    def problem_of(order: np.ndarray) -> tuple[ModelProto, Problem]:
        model = reordered_model(proto, [graph.positions[s] for s in order.tolist()], constant)
        return model, from_onnx(model, **vars(options)).replace(source=source)

    if method == "exact":
        exact_deps = dependencies(original, graph, optional_taken=False)
        fast_problem = problem_of(order)[1]
        hinted = fast_problem.replace(aliases=[a for a in fast_problem.aliases if not a.optional])
        hint_offsets = _by_ids(plan_with("best", hinted, seed=seed).offsets, hinted, original)
        left = max(LEAST_SECONDS, budget.limit - budget.elapsed())
        order, offsets, exact_stats = exact_order(
            exact_deps, original, order, hint_offsets, seed=seed, threads=threads,
            budget=Budget.of_limit(left, cpu=max(LEAST_SECONDS, budget.left())))
        stats["exact"] = exact_stats
        if not original.alias_optional.any():
            best_bound = exact_stats["bound"]
    positions = [graph.positions[s] for s in order.tolist()]
    candidate, problem = problem_of(order)
    if offsets is not None:
        offsets = _by_ids(offsets, original, problem)
    keep_file = lower_bound(problem) > lower_bound(original) and offsets is None
    if keep_file:
        positions, candidate, problem = list(graph.positions), proto, original
        stats["kept_file_order"] = True
    return Reordering(candidate, problem, original, positions, method,
                      budget.elapsed(), best_bound, offsets, stats)
