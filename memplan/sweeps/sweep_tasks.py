"""A sweep's tasks: the cross product, and one task run where it lands (a Dask worker).

- `make_tasks` expands models (files, or folders searched for what `memplan.load`
  reads), dimension bindings, batch sizes, capacities (`parse_capacity`: bytes or
  units, ``none``, ``file``) and planners (`planner_names`: registered ones,
  ``solve``, ``all``) into frozen `Task` records, models outermost; each
  task's ``key`` identifies its row in an output file (for resuming);
- `run_task` loads the model where it runs (ONNX models re-batched by
  `memplan.onnx.onnx_batch.rebatch`; the last few parsed files and
  problems are kept per process, so the planners of one model share one load),
  plans it, validates the plan with `memplan.validate`, and returns one row
  (`memplan.sweeps.sweep_io.COLUMNS`). It never raises: an error is the row's
  ``error``. The worker process's peak resident memory during the task is
  measured by resetting Linux's high-water mark (``/proc/self/clear_refs``)
  before and reading ``VmHWM`` after.

Cost: `make_tasks` O(tasks); `run_task` one load (when not kept), one plan,
one validation.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from memplan.budget import Stopwatch
from memplan.errors import InvalidPlanError, ProblemError
from memplan.formats.readers import READERS
from memplan.limits import check_capacity, check_time_limit, check_workers
from memplan.sweeps.sweep_io import finish_row

MODEL_SUFFIXES = READERS  # what memplan.load reads: .onnx, .tflite, .csv, .json
FROM_FILE = "file"  # capacity: the one the model's file gives (MiniMalloc's name.CAP.csv)
SOLVE = "solve"  # planner: the whole memplan.solve pipeline (heuristics, then exact)
ALL = "all"  # planner: every heuristic and the exact planner


# ------------------------------------------------------------------ the tasks
@dataclass(frozen=True)
class Task:
    """One plan of a sweep: a model at some shape, capacity and planner."""

    path: str  # the model file as the user named it (the row's key)
    dims: tuple[tuple[str, int], ...] = ()  # symbolic ONNX dimensions bound
    batch: int | None = None  # re-batched to this (ONNX), None: as in the file
    capacity: int | str | None = None  # bytes, None (minimise), or FROM_FILE
    planner: str = "best"
    settings: tuple[tuple[str, Any], ...] = field(default=(), compare=True)  # planner options
    name: str = field(default="", compare=False)  # the model's name in rows (default: stem)

    @property
    def model(self) -> str:
        return self.name or Path(self.path).stem

    @property
    def bindings(self) -> str:
        """``batch=8,seq=128``: the shape the model was planned at ('' as in the file)."""
        given = ([("batch", self.batch)] if self.batch is not None else []) + list(self.dims)
        return ",".join(f"{name}={value}" for name, value in given)

    @property
    def key(self) -> str:
        """What identifies the task's row in an output file (for resuming)."""
        capacity = "none" if self.capacity is None else str(self.capacity)
        settings = ",".join(f"{name}={value}" for name, value in self.settings)
        return f"{self.path}|{self.bindings}|{capacity}|{self.planner}|{settings}"


def parse_capacity(text: str | int | None) -> int | str | None:
    """A capacity: bytes, or with a unit (``256KiB``, ``1MiB``, ``2MB``); ``none``; ``file``
    (the rules of `memplan.limits.check_capacity`)."""
    if isinstance(text, str) and text.strip().lower() == FROM_FILE:
        return FROM_FILE
    return check_capacity(text, "capacity")


def model_files(models: Iterable[str | os.PathLike]) -> list[str]:
    """Each model file named, folders replaced by the model files under them (sorted)."""
    found: list[str] = []
    for entry in models:
        path = Path(entry)
        if path.is_dir():
            inside = sorted(str(p) for p in path.rglob("*")
                            if p.suffix.lower() in MODEL_SUFFIXES and p.is_file())
            if not inside:
                raise ProblemError(f"no model files ({', '.join(MODEL_SUFFIXES)}) in the folder",
                                   file=str(path))
            found += inside
        elif path.is_file():
            if path.suffix.lower() not in MODEL_SUFFIXES:
                raise ProblemError(f"unknown model type; a sweep reads "
                                   f"{', '.join(MODEL_SUFFIXES)}", file=str(path))
            found.append(str(path))
        else:
            raise ProblemError("no such file or folder", file=str(path))
    return list(dict.fromkeys(found))


def model_names(files: Sequence[str]) -> dict[str, str]:
    """Each file's model name in rows and reports: its stem, unless other files share it;
    then the shortest end of its path that none of them has, without the suffix if that
    is enough (``small/model``, ``big/model``; ``big/model.csv``, ``model.json``), else
    the whole path. Models are told apart by path everywhere."""
    def tail(path: Path, k: int, suffixed: bool) -> tuple[str, ...]:
        return (path if suffixed else path.with_suffix("")).parts[-k:]

    names = {}
    for file in files:
        path = Path(file)
        others = [Path(f) for f in files if f != file and Path(f).stem == path.stem]
        ends = [(k, suffixed) for suffixed in (False, True)
                for k in range(2 - suffixed, len(path.parts) + 1)]
        names[file] = path.stem if not others else next(
            ("/".join(tail(path, k, s)) for k, s in ends
             if all(tail(other, k, s) != tail(path, k, s) for other in others)), file)
    return names


def planner_names(planners: Iterable[str]) -> list[str]:
    """The planners named (``all`` expanded), each checked against the registry."""
    from memplan.api import heuristic_names
    from memplan.registry import get_planner

    names: list[str] = []
    for name in planners:
        if name == ALL:
            names += [*heuristic_names(), "exact"]
        elif name != SOLVE:
            get_planner(name)  # UnknownPlannerError lists the valid names
            names.append(name)
        else:
            names.append(name)
    return list(dict.fromkeys(names))


def make_tasks(models: Iterable[str | os.PathLike], *,
               dims: Mapping[str, Sequence[int]] | None = None,
               batches: Sequence[int] | None = None,
               capacities: Sequence[int | str | None] | None = None,
               planners: Sequence[str] = ("best",), time_limit: float | None = 10.0,
               heuristic_time_limit: float = 1.0, seed: int = 0, threads: int = 1,
               alignment: int | None = None,
               options: Mapping[str, Mapping[str, Any]] | None = None) -> list[Task]:
    """The cross product, models outermost (see the module docstring)."""
    files = model_files(models)
    names = planner_names(planners)
    options = dict(options or {})
    stray = sorted(set(options) - set(names))
    if stray:
        raise ProblemError(f"options for planner {stray[0]!r}, which the sweep does not run "
                           f"(planners: {', '.join(names)})")
    time_limit = check_time_limit(time_limit, "time_limit")
    heuristic_time_limit = check_time_limit(heuristic_time_limit, "heuristic_time_limit")
    check_workers(threads, "threads", default_allowed=False)
    sizes = [parse_capacity(c) for c in (capacities if capacities is not None else [FROM_FILE])]
    if not sizes:
        raise ProblemError("no capacity given (bytes, with a unit, 'none' or 'file')")
    dim_items = [[(name, int(v)) for v in values] for name, values in (dims or {}).items()]
    shapes = [tuple(combo) for combo in itertools.product(*dim_items)]
    combos = list(itertools.product(batches or [None], shapes))
    tasks = []
    models = model_names(files)
    for path in files:
        onnx = Path(path).suffix.lower() == ".onnx"
        for (batch, bound), capacity, planner in itertools.product(
                combos if onnx else [(None, ())], sizes, names):
            tasks.append(Task(path, bound, batch, capacity, planner,
                              _settings(planner, time_limit, heuristic_time_limit, seed,
                                        threads, alignment, options.get(planner, {})),
                              models[path]))
    return tasks


def _settings(planner, time_limit, heuristic_time_limit, seed, threads, alignment, extra):
    """The options a planner's result depends on (part of its row's key); ``extra`` are
    the planner's own options, passed to it as they are."""
    exact = planner in ("exact", SOLVE)
    settings: list[tuple[str, Any]] = [("time_limit", time_limit if exact else
                                        heuristic_time_limit), ("seed", seed)]
    if exact:
        settings.append(("threads", threads))
        if planner == SOLVE:
            settings.append(("heuristic_time_limit", heuristic_time_limit))
    if alignment is not None:
        settings.append(("alignment", alignment))
    return tuple(settings) + tuple(sorted(extra.items()))


# ------------------------------------------------------------------ one task, on a worker
@lru_cache(maxsize=4)
def _onnx_model(path: str, stamp: tuple[int, int]):
    """The ONNX file without its weights (one parse for all the shapes of a model here)."""
    from memplan.onnx.onnx_graph import load_graph

    return load_graph(path)


@lru_cache(maxsize=8)
def _load(path: str, stamp: tuple[int, int], dims: tuple, batch: int | None,
          alignment: int | None):
    """The problem of one model file at one shape; ``stamp`` (mtime, size) keys a changed file."""
    from memplan.api import load

    if Path(path).suffix.lower() != ".onnx":
        return load(path, alignment=alignment)
    from memplan.onnx.onnx import from_onnx
    from memplan.onnx.onnx_batch import rebatch

    model, source = _onnx_model(path, stamp)  # never changed below: rebatch copies
    symbols = {d.dim_param for value in model.graph.input
               for d in value.type.tensor_type.shape.dim if d.HasField("dim_param")}
    unknown = [name for name, _ in dims if name not in symbols]
    if unknown:
        raise ProblemError(f"no symbolic dimension {unknown[0]!r} in the graph inputs "
                           f"(symbols: {', '.join(sorted(symbols)) or 'none'})", file=path)
    if batch is not None:
        model = rebatch(model, batch, source=source)
    return from_onnx(model, dims=dict(dims), alignment=alignment or 1, name=Path(path).stem)


def _reset_peak() -> bool:
    """Reset the process's peak resident memory (Linux: /proc/self/clear_refs 5)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _peak_memory() -> int | None:
    """The process's peak resident memory in bytes (since the last reset, on Linux)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB


def _plan(task: Task, problem):
    from memplan.api import fits, solve
    from memplan.registry import plan_with
    from memplan.validate import validate

    settings = dict(task.settings)
    settings.pop("alignment", None)
    threads = settings.pop("threads", None)
    if task.planner in (SOLVE, "exact"):  # CP-SAT threads, unless an option said otherwise
        settings.setdefault("threads", threads)
    if task.planner == SOLVE:
        plan = solve(problem, **settings)  # validated by solve
    else:
        plan = plan_with(task.planner, problem, **settings)
    violations = [v for v in validate(problem, plan)
                  if not (v.kind == "capacity" and not fits(plan))]
    if violations:
        raise InvalidPlanError(violations)
    return plan


def run_task(task: Task, plans: str | None = None) -> dict[str, Any]:
    """Load, plan and validate one task where it runs; its row (errors included, never raised).
    ``plans``: a folder to write the plan into (`memplan.sweeps.sweep_plans`)."""
    watch = Stopwatch()
    exact_peak = _reset_peak()
    row: dict[str, Any] = {"task": task.key, "model": task.model, "path": task.path,
                           "bindings": task.bindings, "batch": task.batch,
                           "planner": task.planner, "settings": ",".join(
                               f"{k}={v}" for k, v in task.settings)}
    try:
        stat = os.stat(task.path)
        problem = _load(task.path, (stat.st_mtime_ns, stat.st_size), task.dims, task.batch,
                        dict(task.settings).get("alignment"))
        if task.capacity != FROM_FILE:
            problem = problem.replace(capacity=task.capacity)
        row.update(capacity=problem.capacity, buffers=len(problem),
                   lower_bound=_lower_bound(problem))
        plan = _plan(task, problem)
        if plans is not None:
            from memplan.sweeps.sweep_plans import save_plan

            save_plan(plans, task, problem, plan)
        row.update(arena_size=plan.arena_size, best_bound=plan.best_bound, status=plan.status,
                   gap=plan.gap, seconds=plan.seconds, valid=True,
                   winner=plan.stats.get("winner", plan.planner))
    except Exception as error:  # the row says what went wrong; the sweep goes on
        if task.capacity not in (FROM_FILE, None):
            row.setdefault("capacity", task.capacity)
        row.update(status="error", error=f"{type(error).__name__}: {error}")
    row.update(total_seconds=watch.elapsed(),
               peak_memory=_peak_memory() if exact_peak else None, worker=_worker_name())
    return finish_row(row)


def _lower_bound(problem) -> int:
    from memplan.bounds import lower_bound

    return lower_bound(problem)


def _worker_name() -> str:
    try:
        from distributed import get_worker

        return f"{get_worker().address} pid {os.getpid()}"
    except (ImportError, ValueError):
        return f"pid {os.getpid()}"


__all__ = ["ALL", "FROM_FILE", "MODEL_SUFFIXES", "SOLVE", "Task", "make_tasks", "model_files",
           "model_names", "parse_capacity", "planner_names", "run_task"]
