"""The library API: load a model, solve it, compare planners, in a few calls.

A compiler back end needs one call: ``memplan.solve(buffers)`` with the
buffers it built itself (a list of `Buffer` or a `Problem`), no file::

    plan = memplan.solve([Buffer("x", 4096, 0, 2), Buffer("y", 4096, 1, 3)],
                         time_limit=5)
    plan.offsets, plan.arena_size, plan.status, plan.gap

`solve` is the pipeline that the command line and the notebooks share:

- run the heuristics (``best``: the fast ones, the smallest plan kept; to
  fit a capacity with the exact planner's canonical search, one ``best_fit``
  pass: the search settles the question sooner than ``best`` would), and
  ``greedy_by_size`` uncut when they do not (``best`` runs it first, uncut):
  whatever the limit, no plan of `solve` is larger than that cheapest greedy's
  (``stats["cut_short"]`` says when the limit cut a step short);
- stop there when that plan reaches the lower bound (it is optimal);
- otherwise run the exact planner for ``time_limit`` seconds, warm-started
  with the heuristic plan (its hint and upper bound), reporting incumbent and
  bound through ``on_progress``; Ctrl-C keeps the best plan so far;
- return the best plan. `solve_report` returns everything it learned on the
  way (the naive arena, the heuristic plan, the exact plan).

Settings are records passed explicitly: `SolveOptions` for the pipeline
(``solve(problem, SolveOptions(time_limit=5))``, or its fields as keywords)
and `ExactOptions` for the exact planner (``exact_options=``). The time limit
goes ``SolveOptions.time_limit`` -> one `memplan.budget.Budget`, made as `solve_report`
begins (a caller planning several problems, a part of one, or an ExecuTorch graph's
arenas hands it a child budget instead, ``budget=``) -> a child budget per stage
(`Budget.share`: the heuristics', each part's, the exact planner's) ->
`memplan.solver.exact.plan` (each part's share)
-> `memplan.solver.cp_search.search` (``seconds``) -> `memplan.solver.cp_params.cp_solver`
(CP-SAT's ``max_time_in_seconds``).

`solve_models` plans several models in one arena (exclusive or concurrent).
`compare` runs every planner on several problems and returns one pandas
table; `info` describes a problem. Each plan that `solve` or `compare` returns
has passed the independent validator (an invalid plan raises
`InvalidPlanError`); only a plan whose status says it does not fit
(``infeasible``, ``unknown``) may exceed the capacity.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from functools import partial
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from memplan import parts
from memplan.bounds import load_profile, lower_bound
from memplan.budget import Budget, Stopwatch, deadline_in, to_deadline
from memplan.deploy.multimodel import MultiModel, combine, stack
from memplan.errors import InvalidPlanError, ProblemError, renamed_keyword
from memplan.formats import readers
from memplan.heuristics import long_first
from memplan.limits import (
    check_capacity,
    check_seed,
    check_time_limit,
    check_workers,
    parse_gap,
)
from memplan.options import option, options_record, renamed_fields
from memplan.plan import Plan, fits, gap_of, plan_rank
from memplan.problem import Buffer, Problem
from memplan.registry import ceiling_fits, ceiling_planner, plan_with, planners
from memplan.shares import (
    COMPARE_SLACK,
    EXACT_LEAST,
    HEURISTIC_LEAST,
    HEURISTIC_MOST,
    HEURISTIC_SHARE,
    SEARCH_LEAST,
    SEARCH_SHARE,
    SEARCH_SWEEPS_SHARE,
    VALIDATE_MARGIN,
)
from memplan.solver.exact import by_neighbourhoods, canonical_first
from memplan.solver.exact_options import ExactOptions
from memplan.stopping import stopped, watched
from memplan.validate import known_valid, mark_valid, validate

if TYPE_CHECKING:
    import pandas as pd

EXACT = "exact"  # the registered name of the exact planner
NAIVE_PLAN_BUFFERS = 5000  # up to this many buffers the naive figure is the naive planner's
FIT_FIRST_HEURISTIC = "best_fit"  # fit mode, canonical search: one pass instead of `best`
SEARCH_WORK = 500_000  # units `best` places in its order search when the exact planner follows
DEFAULT_MODEL = "squeezenet.onnx"  # bundled in memplan/data, planned when no model is given


@renamed_fields(workers="threads", heuristic="planner")
@dataclass(frozen=True)
class SolveOptions:
    """How `solve` plans; the ``memplan solve`` options are built from these fields."""

    time_limit: float | None = option(10.0, "seconds for the whole solve, heuristics included "
                                            "('none': until proven)")
    planner: str = option("best", "heuristic planner to start from: a planner name, or 'all' "
                                  "of them")
    exact: bool = option(True, "run the exact planner after the heuristics")
    heuristic_time_limit: float | None = option(None, "seconds each heuristic may take; default: "
                                                "half the time limit, at least 1 s")
    threads: int | None = option(None, "CP-SAT threads (default: the exact planner's "
                                       "choice)")
    seed: int = option(0, "random seed of every planner: same seed, same plan")
    gap: str | float | int | None = option(None, "stop once the proven gap is this small: a "
                                           "share (1%, 0.01) or bytes (4KiB, 4096B); the plan "
                                           "is then 'feasible' with its gap")

    def __post_init__(self):
        check_run_options(self.time_limit, self.heuristic_time_limit, self.threads, self.seed)
        if self.gap is not None:
            parse_gap(self.gap)
        for name in ("time_limit", "heuristic_time_limit"):  # infinity: no limit (None)
            object.__setattr__(self, name, check_time_limit(getattr(self, name), name))
        object.__setattr__(self, "seed", check_seed(self.seed))  # np.int64(3): 3


def check_run_options(time_limit, heuristic_time_limit, threads, seed) -> None:
    """Refuse a negative or NaN time limit, fewer than one worker, a seed that is no integer
    (the rules of `memplan.limits`)."""
    check_time_limit(time_limit, "time_limit")
    check_time_limit(heuristic_time_limit, "heuristic_time_limit")
    check_workers(threads, "threads")
    check_seed(seed)


@dataclass
class SolveReport:
    """What `solve_report` learned: the plan it returns and the steps that led there."""

    problem: Problem
    plan: Plan  # the best valid plan found
    naive: int  # the arena of the ``naive`` planner: no reuse (every buffer its own bytes)
    heuristics: dict[str, Plan]  # every heuristic plan, by planner name
    heuristic: Plan  # the best of them: the exact planner's warm start
    exact: Plan | None  # the exact planner's plan, None when it did not run
    interrupted: bool = False  # Ctrl-C stopped the exact planner
    out_of_time: bool = False  # the heuristics left the exact planner no time
    within_gap: bool = False  # the heuristic plan was within the gap tolerance already
    seconds: float = 0.0  # wall time of the whole pipeline

    @property
    def skipped_exact(self) -> str | None:
        """Why the exact planner did not run, or None when it ran."""
        if self.exact is not None:
            return None
        if self.heuristic.status == "optimal":
            return "not needed, the heuristic plan reaches the lower bound"
        if self.within_gap:
            return "not needed, the heuristic plan is within the gap tolerance"
        if self.interrupted:
            return "interrupted during the heuristics"
        if self.out_of_time:
            return "no time left after the heuristics"
        return "not asked"


# ------------------------------------------------------------------ loading
def default_model() -> Path:
    """The small ONNX model bundled with memplan (SqueezeNet): what ``memplan solve`` plans."""
    return Path(str(resources.files("memplan") / "data" / DEFAULT_MODEL))


def from_onnx(model: Any, **options: Any) -> Problem:
    """An ONNX model (path or ``ModelProto``) as a `Problem`; see `memplan.onnx.onnx`."""
    from memplan.onnx.onnx import from_onnx as convert

    return convert(model, **options)


def from_tflite(model: Any, **options: Any) -> Problem:
    """A ``.tflite`` model (path or bytes) as the `Problem` TFLite-Micro plans; see
    `memplan.tflite.tflite` (needs the ``tflite`` extra)."""
    from memplan.tflite.tflite import from_tflite as convert

    return convert(model, **options)


def from_executorch(program: Any, **options: Any) -> Problem:
    """A PyTorch program lowered through ExecuTorch (``ExportedProgram``, edge or ExecuTorch
    program manager, ``.pte`` path) as the `Problem` its memory planning pass plans; see
    `memplan.executorch.executorch` (needs the ``executorch`` extra)."""
    from memplan.executorch.executorch import from_executorch as convert

    return convert(program, **options)


def from_relax(module: Any, function: str | None = "forward", **options: Any) -> Problem:
    """A TVM Relax module (``IRModule`` or TVMScript ``.py`` path) as the `Problem` of the
    tensors Relax's ``StaticPlanBlockMemory`` planned in ``function``; see
    `memplan.tvm.relax` (needs the ``tvm`` extra)."""
    from memplan.tvm.relax import from_relax as convert

    return convert(module, function, **options)


def load(path: str | os.PathLike, *, dims: Mapping[str, int] | None = None,
         alignment: int | None = None, **options: Any) -> Problem:
    """The problem in ``path`` (``.onnx``, ``.tflite``, ``.csv`` or ``.json``, by extension).

    ``dims`` binds an ONNX model's symbolic dimensions (``{"batch": 1}``);
    ``alignment`` makes every offset a multiple of it (ONNX: the frontend's
    option; files: raised on every buffer). ``options`` go to the reader.
    """
    is_onnx = Path(path).suffix.lower() == ".onnx"
    if dims and not is_onnx:
        raise ProblemError("dimensions (--dim) apply to ONNX models only", file=str(path))
    if is_onnx:
        if dims:
            options["dims"] = dict(dims)
        if alignment is not None:
            options["alignment"] = alignment
        if not Path(path).exists():  # the frontend may not say which file is missing
            raise ProblemError("no such file", file=str(path))
    problem = readers.load(path, **options)
    return problem if is_onnx or alignment is None else with_alignment(problem, alignment)


def with_alignment(problem: Problem, alignment: int) -> Problem:
    """A copy of ``problem`` where every buffer's alignment is a multiple of ``alignment``."""
    if alignment < 1:
        raise ProblemError(f"alignment must be >= 1, got {alignment}", file=problem.source)
    if (problem.alignments % alignment == 0).all():
        return problem
    return problem.replace(buffers=[replace(b, alignment=math.lcm(b.alignment, alignment))
                                    for b in problem.buffers])


def as_problem(problem: Problem | Iterable[Buffer]) -> Problem:
    """A `Problem` as is; a list of `Buffer` (what a back end builds) wrapped into one."""
    return problem if isinstance(problem, Problem) else Problem(problem)


# ------------------------------------------------------------------ solving
def heuristic_names() -> list[str]:
    """Every registered planner but the exact one(s), in name order."""
    return [name for name, fn in planners().items()
            if not fn.__module__.startswith("memplan.solver")]


def _checked(problem: Problem, plan: Plan, twin: Plan | None = None) -> Plan:
    """``plan`` once the validator accepts it; one that does not `fits` may exceed the capacity.

    ``twin``: a plan the validator passed for this problem already; when ``plan`` has the
    very same offsets (an exact planner that found nothing better than its warm start),
    its verdict holds and the check is not run twice (``stats["validated_as"]``).
    """
    watch = Stopwatch()
    over = fits(plan) and problem.capacity is not None and plan.arena_size > problem.capacity
    if known_valid(plan, problem) and not over:
        return plan  # its planner ran the validator on this very problem (`mark_valid`)
    if twin is not None and known_valid(twin, problem) and not over and \
            np.array_equal(np.asarray(plan.offsets), np.asarray(twin.offsets)):
        plan.stats["validated_as"] = twin.planner
        return mark_valid(plan, problem)
    violations = [v for v in validate(problem, plan)
                  if not (v.kind == "capacity" and not fits(plan))]
    if violations:
        raise InvalidPlanError(violations)
    plan.stats["validate_seconds"] = watch.elapsed()
    return mark_valid(plan, problem)


def run_heuristics(problem: Problem, names: Iterable[str], *, seed: int = 0,
                   time_limit: float | None = 1.0, searched: bool = True,
                   budget: Budget | None = None) -> dict[str, Plan]:
    """Each named heuristic's validated plan, by name (``time_limit`` for each: a heuristic's
    own seconds, not a share of what is left). ``searched=False`` (the exact planner
    follows): ``best`` searches orders for a fixed amount of work (``SEARCH_WORK`` units
    placed) instead of until the limit; ``budget``: ``best``'s own (a timed search: its CPU
    allowance, and the wall deadline of the heuristics' part of the limit). Ctrl-C
    (``KeyboardInterrupt``) ends the run with the plans so far, the last one marked
    ``stats["interrupted"]``; it is raised again when there is none."""
    extra = {"best": {"budget": budget}} if budget is not None else \
        {} if searched else {"best": {"search_evaluations": SEARCH_WORK // max(1, len(problem))}}
    plans: dict[str, Plan] = {}
    found = None  # the last plan, before its validation
    try:
        for name in names:
            options = extra.get(name, {})
            timing = {} if "budget" in options else {"time_limit": time_limit}
            found = name, plan_with(name, problem, seed=seed, **timing, **options)
            plans[name] = _checked(problem, found[1])
            found = None
            if plans[name].stats.get("interrupted"):
                break
    except KeyboardInterrupt:  # the validation of a plan in hand is finished (a second
        if found is None:  # Ctrl-C would abort it)
            if not plans:
                raise
            next(reversed(plans.values())).stats["interrupted"] = True
        else:
            found[1].stats["interrupted"] = True
            plans[found[0]] = _checked(problem, found[1])
    return plans


def _deployment_planners(problem: Problem) -> tuple[Callable, Callable] | None:
    """The (heuristic, exact) pair for memory regions or variable scratch, else None.

    Both wrap a registered planner (the heuristic one, ``best`` by default)
    and never return a plan worse than their warm start.
    """
    if problem.regions:
        from memplan.deploy.regions import plan_regions
        from memplan.deploy.regions_exact import plan_regions_exact

        return plan_regions, plan_regions_exact
    if (problem.max_sizes > problem.sizes).any():
        from memplan.deploy.scratch import plan_scratch
        from memplan.deploy.scratch_exact import plan_scratch_exact

        return plan_scratch, plan_scratch_exact
    return None


def solve_options(options: SolveOptions | None = None, **fields: Any) -> SolveOptions:
    """The pipeline's record: ``options`` as given, or built from its ``fields`` as keywords
    (`TypeError` for both, or for a field `SolveOptions` lacks)."""
    return options_record(SolveOptions, options, fields)


def exact_settings(settings: SolveOptions,
                   exact_options: ExactOptions | Mapping[str, Any] | None = None, *,
                   on_progress: Callable[..., Any] | None = None,
                   stop: threading.Event | None = None) -> ExactOptions:
    """The exact planner's record in the pipeline: ``exact_options`` (a record or its fields),
    with the seed and threads of ``settings`` and the progress callback and stop event of
    the call (the time limit goes to the planner as its budget, not in the record)."""
    record = exact_options if isinstance(exact_options, ExactOptions) else \
        ExactOptions.from_kwargs(**dict(exact_options or {}))
    extra: dict[str, Any] = {}
    if settings.threads is not None:
        extra["threads"] = settings.threads
    if settings.gap is not None:
        extra["relative_gap"], extra["absolute_gap"] = parse_gap(settings.gap)
    if on_progress is not None:
        extra["on_progress"] = on_progress
    if stop is not None:
        extra["stop"] = stop
    return replace(record, time_limit=None, seed=settings.seed, **extra)


def solve_report(problem: Problem | Iterable[Buffer], options: SolveOptions | None = None, *,
                 capacity: int | None = None,
                 on_progress: Callable[..., Any] | None = None,
                 stop: threading.Event | None = None,
                 exact_options: ExactOptions | Mapping[str, Any] | None = None,
                 budget: Budget | None = None, **fields: Any) -> SolveReport:
    """`solve`, keeping every step's result (see the module docstring for the steps).

    Problems with memory regions or variable-size scratch go to their own
    planners (`memplan.deploy.regions`, `memplan.deploy.scratch` and their exact versions);
    those take no progress callback, stop event or exact planner options. ``budget``: the
    caller's share of a limit of its own (a `Budget`, whose ``limit`` the pipeline's
    shares are of), in place of ``time_limit`` (which is then not read).
    """
    settings = solve_options(options, **fields)
    budget = Budget.of_limit(settings.time_limit) if budget is None else budget
    problem = as_problem(problem)
    if capacity is not None:
        problem = problem.replace(capacity=check_capacity(capacity))
    deployment = _deployment_planners(problem)
    if deployment is not None:
        report = _solve_deployment(problem, settings, *deployment, budget=budget)
        report.seconds = budget.elapsed()
        return report
    whole = partial(_solve_whole, on_progress=on_progress, stop=stop,
                    exact_options=exact_options)
    split = parts.groups(problem) if len(problem) >= parts.PART_BUFFERS and \
        problem.widths is None else []
    if len(split) > 1:  # independent parts: each planned on its own (`memplan.parts`)
        report = parts.solve_parts(
            problem, split, settings, whole, _checked,
            lambda plan, heuristic, exact: SolveReport(problem, plan, naive_arena(problem), {
                heuristic.planner: heuristic}, heuristic, exact), budget)
    else:
        report = whole(problem, settings, budget=budget)
    report.seconds = budget.elapsed()
    return report


def _solve_whole(problem: Problem, settings: SolveOptions, *, budget: Budget,
                 on_progress: Callable[..., Any] | None,
                 stop: threading.Event | None,
                 exact_options: ExactOptions | Mapping[str, Any] | None) -> SolveReport:
    """`solve_report` of one problem planned whole within ``budget``: the heuristics, then
    the exact planner with the time left."""
    names = heuristic_names() if settings.planner == "all" else [settings.planner]
    record = exact_settings(settings, exact_options, on_progress=on_progress, stop=stop)
    if settings.exact and settings.planner == "best" and problem.capacity is not None \
            and canonical_first(problem, record):
        names = [FIT_FIRST_HEURISTIC]  # `best` searches; the canonical search fits sooner
    timed = _search_seconds(problem, settings, record, budget.limit) if settings.exact \
        else None
    plans = run_heuristics(  # a timed search: `best`'s seconds in CPU, the clock the limit's
        problem, names, seed=settings.seed, searched=not settings.exact or timed is not None,
        time_limit=heuristic_seconds(settings, budget.limit) if timed is None else timed,
        budget=None if timed is None else budget.share(by=HEURISTIC_MOST, cpu=timed))
    ceiling = ceiling_planner(problem, budget.limit)
    if "best" not in plans and ceiling not in plans:  # no plan of `solve` is larger
        plans.update(run_heuristics(problem, [ceiling], time_limit=None))
    heuristic = min(plans.values(), key=lambda plan: plan_rank(problem, plan))
    if ceiling in plans:  # the exact planner need not run it again
        heuristic.stats.setdefault("ceiling_arena", plans[ceiling].arena_size)
    naive = plans["naive"].arena_size if "naive" in plans else naive_arena(problem)
    report = SolveReport(problem, heuristic, naive, plans, heuristic, None)
    report.interrupted = any(plan.stats.get("interrupted") for plan in plans.values())
    report.within_gap = heuristic.status == "feasible" and \
        record.within_gap(heuristic.arena_size, heuristic.best_bound)
    if settings.exact and heuristic.status != "optimal" and not report.interrupted \
            and not report.within_gap:
        try:
            # CP-SAT is imported by the exact planner (inside its own time limit) only if
            # its canonical search has not settled the question. The exact plan is
            # checked too (as long as the heuristic's check): time kept for it; the
            # exact planner gets the rest of the limit
            check = VALIDATE_MARGIN * heuristic.stats.get("validate_seconds", 0.0)
            left = budget.share(keep=check)
            if left.limit is not None and left.limit <= EXACT_LEAST * budget.limit:
                report.out_of_time = report.plan.stats["cut_short"] = True
                return report
            with watched(stop):  # Ctrl-C sets ``stop``; the exact planner watches it
                exact = plan_with(EXACT, problem, hint=heuristic,  # validated: no check
                                  options=record, budget=left)
            report.interrupted = bool(exact.stats.get("interrupted")) or bool(
                stop is not None and stop.is_set())
            report.exact = _checked(problem, exact, twin=heuristic)
            report.plan = min(exact, heuristic, key=lambda plan: plan_rank(problem, plan))
        except KeyboardInterrupt:  # stopped before the exact planner had a plan
            report.interrupted = True
    return report


def naive_arena(problem: Problem) -> int:
    """The arena of the ``naive`` planner (no reuse); on large problems without its optional
    aliases (it would list every pair of overlapping lifetimes to take them) and without
    building a plan: O(n)."""
    if len(problem) <= NAIVE_PLAN_BUFFERS:
        return plan_with("naive", problem).arena_size
    from memplan.groups import alias_units

    units = alias_units(problem)
    top = int((units.pinned_base + units.extent)[units.pinned].max(initial=0))
    free = units.free
    modulus, extent = units.modulus[free], units.extent[free]
    if len(free) and not units.residue[free].any() and (modulus == modulus[0]).all():
        step = int(modulus[0])  # one alignment: each base is the last one + its padded extent
        padded = -(-extent // step) * step
        return -(-top // step) * step + int(padded[:-1].sum()) + int(extent[-1])
    for residue, step, size in zip(units.residue[free].tolist(), modulus.tolist(),
                                      extent.tolist(), strict=True):
        top += (residue - top) % step + size  # the next aligned base, then the unit
    return top


def _search_seconds(problem: Problem, settings: SolveOptions,
                    record: ExactOptions, limit: float | None) -> float | None:
    """Seconds of `best`'s timed order search before the exact planner, or None (a fixed
    budget, `SEARCH_WORK`): minimising a problem that the exact planner would improve by
    neighbourhoods, where its windows gain less than the order search in its first
    seconds (training traces: docs/explanation/heuristic-search.md); `SEARCH_SWEEPS_SHARE`
    of the limit where the ceiling's work does not fit it (`ceiling_fits`: `best` runs only
    its sweeps, `long_first` and the stack) and `long_first` takes the problem (a few
    long-lived buffers: its descent gains with its time, and the windows at that size move
    none of the long-lived buffers that set the peak)."""
    if problem.capacity is not None or limit is None or settings.heuristic_time_limit \
            is not None or not by_neighbourhoods(problem, record):
        return None
    sweeps = not ceiling_fits(problem, limit) and long_first.takes_buffers(problem)
    share = SEARCH_SWEEPS_SHARE if sweeps else SEARCH_SHARE
    return min(HEURISTIC_MOST * limit, max(SEARCH_LEAST, share * limit))


def heuristic_seconds(settings: SolveOptions, limit: float | None) -> float:
    """Seconds for each heuristic: the option, or `HEURISTIC_SHARE` of the pipeline's
    ``limit`` (at least `HEURISTIC_LEAST`), never more than `HEURISTIC_MOST` of it (what
    follows the heuristics takes a little time too)."""
    if settings.heuristic_time_limit is not None:
        return settings.heuristic_time_limit
    if limit is None:
        return HEURISTIC_LEAST
    return min(max(HEURISTIC_LEAST, HEURISTIC_SHARE * limit), HEURISTIC_MOST * limit)


def _solve_deployment(problem: Problem, settings: SolveOptions, heuristic_planner: Callable,
                      exact_planner: Callable, *, budget: Budget) -> SolveReport:
    """`solve_report` for regions or variable scratch within ``budget``: their heuristic,
    then their exact with the time left."""
    planner = "best" if settings.planner == "all" else settings.planner
    heuristic = _checked(problem, heuristic_planner(
        problem, planner=planner, time_limit=heuristic_seconds(settings, budget.limit),
        seed=settings.seed))
    report = SolveReport(problem, heuristic, int(problem.max_sizes.sum()),
                         {heuristic.planner: heuristic}, heuristic, None)
    if settings.exact and heuristic.status != "optimal" and not heuristic.stats.get("cost_optimal"):
        extra = {} if settings.threads is None else {"threads": settings.threads}
        report.exact = report.plan = _checked(problem, exact_planner(
            problem, budget=budget.share(), seed=settings.seed, hint=heuristic, **extra))
    return report


def solve(problem: Problem | Iterable[Buffer], options: SolveOptions | None = None, *,
          capacity: int | None = None, on_progress: Callable[..., Any] | None = None,
          stop: threading.Event | None = None,
          exact_options: ExactOptions | Mapping[str, Any] | None = None,
          **fields: Any) -> Plan:
    """Plan ``problem``: heuristics, then the exact planner warm-started; the best plan.

    ``problem`` is a `Problem` or a list of `Buffer`. ``options`` is a
    `SolveOptions` record, or its fields come as keywords: ``time_limit``
    (seconds, default 10), ``heuristic`` (``"best"``, a planner name or
    ``"all"``), ``exact``, ``heuristic_time_limit``, ``threads``, ``seed``.
    ``exact_options`` is an `ExactOptions` record (or its fields) for the
    exact planner; its time limit, seed and threads come from ``options``.
    ``capacity`` (bytes) turns minimising into fitting. ``on_progress`` is
    called by the exact planner with a `Progress` (``arena_size``,
    ``best_bound``, ``seconds``); setting ``stop`` (from any thread) ends its
    search with the best plan so far, as Ctrl-C does. The plan's ``status``
    says whether it is proven optimal, and ``gap`` how far from it at most.
    """
    return solve_report(problem, options, capacity=capacity, on_progress=on_progress,
                        stop=stop, exact_options=exact_options, **fields).plan


def solve_models(problems: Mapping[str, Problem], mode: str = "exclusive", *,
                 options: SolveOptions | None = None,
                 capacity: int | None = None, on_progress: Callable[..., Any] | None = None,
                 stop: threading.Event | None = None,
                 exact_options: ExactOptions | Mapping[str, Any] | None = None,
                 **fields: Any) -> tuple[MultiModel, SolveReport]:
    """Several models in one arena (see `memplan.deploy.multimodel`), each step as in `solve`.

    ``exclusive`` (never run together): one problem over the concatenated
    time axes, solved once. ``concurrent`` (may run together): each model
    solved alone, with an equal share of ``time_limit``, and the parts laid
    end to end (`memplan.deploy.multimodel.stack`); the report's plans are the
    stacked ones. ``MultiModel.split`` and `memplan.deploy.multimodel.report` give
    each model's share.
    """
    multi = combine(problems, mode, capacity=check_capacity(capacity))
    steps = dict(on_progress=on_progress, stop=stop, exact_options=exact_options)
    settings = solve_options(options, **fields)
    if mode == "exclusive":
        return multi, solve_report(multi.problem, settings, **steps)
    share = None if settings.time_limit is None else settings.time_limit / len(multi.parts)
    reports = [solve_report(part, settings, budget=Budget.of_limit(share), **steps)
               for part in multi.parts]
    exact = None if all(r.exact is None for r in reports) else \
        stack(multi, [r.exact or r.heuristic for r in reports])
    return multi, SolveReport(
        multi.problem, stack(multi, [r.plan for r in reports]), sum(r.naive for r in reports),
        {}, stack(multi, [r.heuristic for r in reports]), exact,
        any(r.interrupted for r in reports), sum(r.seconds for r in reports))


# ---------------------------------------------------------------- comparing
def compare(problems: Mapping[str, Problem] | Iterable[Problem], *,
            planners: Iterable[str] | None = None, time_limit: float | None = 10.0,
            heuristic_time_limit: float | None = None, seed: int = 0,
            threads: int | None = None, stop: threading.Event | None = None,
            began: float | None = None, workers: int | None = None) -> pd.DataFrame:
    """Every planner on every problem: one row per (problem, planner).

    ``planners`` defaults to every heuristic and the exact planner; the exact
    planner starts from the best heuristic plan of its problem. ``time_limit``
    bounds the whole call, counted from ``began`` (a `time.perf_counter` value;
    default: now; the seconds before the call count as spent): each problem
    gets an equal share of the time left, and of that the heuristics half (all
    of it without the exact planner), each one an equal slice of what they have
    left, unless ``heuristic_time_limit`` gives each its seconds (on the wall
    clock; once their half is spent, they run with no time to search: one pass
    each); the exact planner gets the rest. The shares are CPU seconds (of the
    thread running the heuristics; the exact planner's per thread its search
    keeps busy, its ``stats["cpu_seconds"]``): each planner gets a child budget
    (`memplan.budget.Budget.split`) with its share as the CPU allowance and the wall
    time left of the call as its deadline; those that count CPU (``best``, ``anneal``,
    ``genetic``, ``hill_climb``, ``canonical``, ``exact``) spend the allowance, a
    one-pass planner runs for it converted at the call's pace. So a busy machine gives
    the same table as a quiet one, later, as long as the wall limit is not reached.
    Planners the problem's share or the wall time left leaves no room for are skipped
    (``table.attrs["skipped"]``, by problem; each problem gets one plan at
    least). Setting ``stop`` (Ctrl-C in the command) ends the comparison with
    the rows so far (``table.attrs["interrupted"]``). Columns: problem,
    buffers, planner, arena_size, lower_bound, best_bound, optimum (the proven
    optimum of the problem when some plan proved it, else NaN),
    over_lower_bound and over_optimum (fractions: 0.05 is 5 % more), gap
    (`memplan.plan.gap_of` to the best bound any planner proved for the
    problem), status, seconds. Every plan is validated. ``workers``: the old name of
    ``threads`` (deprecated).
    """
    import pandas as pd

    threads = renamed_keyword("workers", workers, "threads", threads,
                              where="compare")

    check_run_options(time_limit, heuristic_time_limit, threads, seed)
    time_limit = check_time_limit(time_limit, "time_limit")
    named = list(problems.items() if isinstance(problems, Mapping) else
                 ((p.name or f"problem {k}", p) for k, p in enumerate(problems)))
    chosen = list(planners) if planners is not None else [*heuristic_names(), EXACT]
    deadline = None if time_limit is None else \
        deadline_in(time_limit) if began is None else began + time_limit
    clock = Budget(None if deadline is None else to_deadline(deadline), deadline)
    rows, interrupted, skipped = [], False, {}
    for k, (name, problem) in enumerate(named):
        share = None if clock.cpu is None else max(0.0, clock.left()) / (len(named) - k)
        skipped[name] = []
        slack = 0.0 if time_limit is None else COMPARE_SLACK * time_limit / len(named)
        run = _Comparing(problem, clock, share, slack, heuristic_time_limit, seed, threads,
                         stop, skipped[name])
        plans, interrupted = run.plans(chosen)
        rows += _rows(name, problem, [p for p in chosen if p in plans], plans)
        if interrupted:
            break
    table = pd.DataFrame(rows)
    table.attrs["interrupted"] = interrupted
    table.attrs["skipped"] = {name: names for name, names in skipped.items() if names}
    return table


class _Comparing:
    """`compare`'s run of one problem: its share of the call's CPU budget (``clock``, whose
    deadline is the call's wall limit), what its planners took and which were skipped."""

    def __init__(self, problem: Problem, clock: Budget, share: float | None,
                 slack: float, heuristic_time_limit: float | None, seed: int,
                 threads: int | None, stop: threading.Event | None, skipped: list[str]):
        self.problem, self.clock, self.slack = problem, clock, slack
        self.end = None if share is None else clock.spent() + share  # a value of `spent`
        self.heuristic_time_limit, self.seed, self.threads = heuristic_time_limit, seed, threads
        self.stop, self.skipped = stop, skipped
        self.check = 0.0  # CPU seconds of the longest validation so far: kept for each plan
        self.dearest = (0.0, 0.0)  # CPU and wall seconds of the dearest planner so far

    def plans(self, chosen: list[str]) -> tuple[dict[str, Plan], bool]:
        """The plans by planner; True when ``stop`` or Ctrl-C ended them early."""
        clock, end = self.clock, self.end
        ceiling = ceiling_planner(self.problem, None if end is None else end - clock.spent())
        # the ceiling first (as in `solve`): a plan of the cheapest greedy's size at least,
        # however little time the planners after it leave (rows keep ``chosen``'s order)
        heuristics = sorted((p for p in chosen if p != EXACT), key=lambda p: p != ceiling)
        part = None if end is None else \
            end - (0.0 if EXACT not in chosen else 0.5) * (end - clock.spent())
        plans: dict[str, Plan] = {}
        try:
            for k, planner in enumerate(heuristics):
                if stopped(self.stop):
                    return plans, True
                cpu = 1.0 if part is None else \
                    (part - clock.spent()) / (len(heuristics) - k) - self.check
                if plans and self._no_room():
                    self.skipped.extend(heuristics[k:])  # the problem's time is spent
                    break
                plans[planner] = self._run(planner, max(0.0, cpu), uncut=planner == ceiling)
                if plans[planner].stats.get("interrupted"):
                    return plans, True
            if EXACT in chosen and plans and self._no_room(exact=True):
                self.skipped.append(EXACT)
            elif EXACT in chosen and not stopped(self.stop):
                hint = min(plans.values(), key=lambda plan: plan_rank(self.problem, plan),
                           default=None)
                plans[EXACT] = self._run(EXACT, None if end is None else max(
                    0.0, end - clock.spent() - self.check), hint)
        except KeyboardInterrupt:  # Ctrl-C in a planner that keeps no plan: the rows so far
            return plans, True
        return plans, stopped(self.stop)

    def _no_room(self, exact: bool = False) -> bool:
        """Whether the next planner would end past the problem's share (CPU seconds) or the
        call's limit (wall seconds), the slack allowed: a heuristic that would take as long
        as the dearest so far (its validation included); the exact planner, when less than
        twice the longest validation is left (one of them kept for its plan's)."""
        clock = self.clock
        need = (2 * self.check, 2 * self.check * clock.pace()) if exact else self.dearest
        left = (None if self.end is None else self.end - clock.spent(),
                None if clock.deadline is None else max(0.0, to_deadline(clock.deadline)))
        return any(seconds is not None and seconds + self.slack <= most
                   for seconds, most in zip(left, need, strict=True))

    def _run(self, planner: str, cpu: float | None, hint: Plan | None = None, *,
             uncut: bool = False) -> Plan:
        """``planner``'s validated plan: its share as the CPU allowance of a child budget
        by the call's wall time left (`Budget.split`: a planner that spends no allowance
        runs for the share at the call's pace); ``heuristic_time_limit``: a heuristic's
        wall limit instead; ``uncut`` (the ceiling, chosen by `ceiling_planner` to fit the
        share): no limit, as in `solve`."""
        clock = self.clock
        watch, cpu_began = Stopwatch(), clock.spent()
        wall = None if clock.deadline is None else \
            clock.deadline - self.check * clock.pace()  # its plan's validation kept
        budget = clock.split(cpu, wall)
        if planner == EXACT:
            options: dict[str, Any] = dict(
                hint=hint, stop=self.stop,
                **({} if self.threads is None else {"threads": self.threads}))
            thread = Stopwatch()
            with watched(self.stop):
                found = plan_with(EXACT, self.problem, budget=budget, seed=self.seed,
                                  **options)
            clock.elsewhere += found.stats.get("cpu_seconds", 0.0) - \
                thread.cpu_elapsed()  # its searches' threads, not this one's alone
        else:
            if uncut:
                budget = Budget.of_limit(None)
            elif self.heuristic_time_limit is not None:
                budget = Budget.of_limit(self.heuristic_time_limit)
            found = plan_with(planner, self.problem, seed=self.seed, budget=budget)
        checking = clock.spent()
        checked = _checked(self.problem, found, twin=hint)
        self.check = max(self.check, clock.spent() - checking)
        self.dearest = tuple(max(a, b) for a, b in zip(
            self.dearest, (clock.spent() - cpu_began, watch.elapsed()),
            strict=True))
        return checked


def _rows(name: str, problem: Problem, chosen: list[str],
          plans: dict[str, Plan]) -> list[dict[str, Any]]:
    """`compare`'s rows of one problem."""
    if not plans:
        return []
    proven = max(p.best_bound for p in plans.values())
    smallest = min(p.arena_size for p in plans.values())
    optimum = smallest if smallest <= proven else math.nan
    return [dict(problem=name, buffers=len(problem), planner=planner,
                 arena_size=plan.arena_size, lower_bound=plan.lower_bound,
                 best_bound=plan.best_bound, optimum=optimum,
                 over_lower_bound=_over(plan.arena_size, plan.lower_bound),
                 over_optimum=_over(plan.arena_size, optimum),
                 gap=gap_of(plan.arena_size, proven), status=plan.status,
                 seconds=plan.seconds)
            for planner in chosen for plan in [plans[planner]]]


def _over(value: int, reference: float) -> float:
    """``value / reference - 1``; 0 for 0 over 0 (an empty problem), inf over a bound of 0."""
    if reference != reference:  # NaN: no proven optimum
        return reference
    if reference == 0:
        return 0.0 if value == 0 else math.inf
    return value / reference - 1


# ------------------------------------------------------------------ describing
def info(problem: Problem, *, largest: int = 10) -> dict[str, Any]:
    """A summary of ``problem``: counts, bound, widths, aliases and its largest tensors."""
    if problem.widths is not None:
        widths = problem.widths
        max_width = int(widths.max(initial=0))
        mean_width = float(widths.mean()) if len(widths) else 0.0  # no steps: no mean
    else:  # from the load profile: O(n log n) whatever the number of steps
        times, loads = load_profile(problem)
        max_width = int(loads.max())
        mean_width = float((loads[:-1] * np.diff(times)).sum() / max(problem.horizon, 1))
    top = np.argsort(-problem.sizes, kind="stable")[:largest]
    return {
        "name": problem.name, "source": problem.source, "buffers": len(problem),
        "steps": problem.horizon, "lower_bound": lower_bound(problem),
        "total_size": int(problem.sizes.sum()),
        "max_width": max_width, "mean_width": mean_width,
        "aliases": int((~problem.alias_optional).sum()),
        "optional_aliases": int(problem.alias_optional.sum()),
        "conflicts": len(problem.conflicts), "capacity": problem.capacity,
        "pinned": int((problem.pinned >= 0).sum()),
        "kinds": {kind: problem.kinds.count(kind) for kind in sorted(set(problem.kinds))},
        "largest": [{"id": problem.ids[i], "size": int(problem.sizes[i]),
                     "start": int(problem.starts[i]), "end": int(problem.ends[i]),
                     "kind": problem.kinds[i]} for i in top.tolist()],
    }


__all__ = ["SolveOptions", "SolveReport", "as_problem", "compare", "default_model",
           "from_executorch", "from_onnx", "from_relax", "from_tflite", "heuristic_names",
           "info", "load", "lower_bound",
           "plan_with", "planners", "solve", "solve_models", "solve_report", "validate",
           "with_alignment"]
