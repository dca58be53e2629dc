"""Sweeps: plan a zoo of models across shapes, memory sizes and planners, on Dask.

The questions teams bring to a memory planner come in batches ("how much SRAM
fits all 40 models?", "how does the arena grow with the batch size?", "which
planner wins, and how far from optimal?"): hundreds of independent plans.
`sweep` runs them as Dask tasks, on a local cluster of worker processes by
default or on an existing cluster (``client=`` / ``scheduler=``):

- the tasks are the cross product of models (files, or folders searched for
  ``.onnx``, ``.tflite``, ``.csv``, ``.json``), dimension bindings (``dims``), batch sizes
  (``batches``: `memplan.frontends.onnx_batch.rebatch` rewrites a model whose
  batch is fixed in the file), capacities and planners (a registered planner,
  ``solve`` for the whole `memplan.solve` pipeline, ``all`` for every
  heuristic and ``exact``). Bindings and batches apply to ONNX models only:
  any other model is one task per capacity and planner;
- each task (`run_task`) loads its model on the worker (a few recent models
  are kept per worker process: the planners of one model share one load),
  plans it, validates the plan there with `memplan.validate` and returns one
  row (a dict): the client holds rows only, never problems or plans;
- a task that fails records its error in its row and the sweep goes on; a
  worker that dies has its tasks re-run elsewhere (Dask reschedules them up to
  ``distributed.scheduler.allowed-failures`` times; a task that keeps killing
  workers becomes an error row); ``retries`` re-runs a task that raised;
- rows go to ``out`` (CSV appended row by row; Parquet rewritten atomically
  at most every few seconds and at the end) as they arrive; Ctrl-C cancels
  what is left and keeps every finished row; a later sweep with the same
  ``out`` skips the tasks whose rows are there (resume).

Cost: one task per row; the client's work per row is O(1) plus the writer's
(Parquet: a rewrite of all rows, throttled). The result is a pandas DataFrame
with the columns of `COLUMNS`; `memplan.sweep_report` draws and summarises it.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memplan.errors import InvalidPlanError, ProblemError
from memplan.frontends import READERS
from memplan.sweep_io import COLUMNS, RowWriter, finish_row
from memplan.viz import human_bytes

if TYPE_CHECKING:
    import pandas as pd

MODEL_SUFFIXES = READERS  # what memplan.load reads: .onnx, .tflite, .csv, .json
FROM_FILE = "file"  # capacity: the one the model's file gives (MiniMalloc's name.CAP.csv)
SOLVE = "solve"  # planner: the whole memplan.solve pipeline (heuristics, then exact)
ALL = "all"  # planner: every heuristic and the exact planner
_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "kib": 1024, "m": 1000**2, "mb": 1000**2,
          "mib": 1024**2, "g": 1000**3, "gb": 1000**3, "gib": 1024**3}


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

    @property
    def model(self) -> str:
        return Path(self.path).stem

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


def parse_size(text: str | int | None) -> int | str | None:
    """A capacity: bytes, or with a unit (``256KiB``, ``1MiB``, ``2MB``); ``none``; ``file``."""
    if text is None or isinstance(text, int):
        return text
    word = text.strip().lower().replace(" ", "")
    if word in ("none", "inf", "unlimited"):
        return None
    if word == FROM_FILE:
        return FROM_FILE
    number = word.rstrip("abcdefghijklmnopqrstuvwxyz")
    unit = word[len(number):]
    try:
        value = float(number) * _UNITS[unit]
    except (KeyError, ValueError):
        raise ProblemError(f"not a memory size: {text!r} (bytes, or with a unit: 256KiB, 1MiB, "
                           f"2MB; or 'none', 'file')") from None
    if value < 0 or value != int(value):
        raise ProblemError(f"not a whole number of bytes: {text!r}")
    return int(value)


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
    sizes = [parse_size(c) for c in (capacities if capacities is not None else [FROM_FILE])]
    dim_items = [[(name, int(v)) for v in values] for name, values in (dims or {}).items()]
    shapes = [tuple(combo) for combo in itertools.product(*dim_items)]
    combos = list(itertools.product(batches or [None], shapes))
    tasks = []
    for path in files:
        onnx = Path(path).suffix.lower() == ".onnx"
        for (batch, bound), capacity, planner in itertools.product(
                combos if onnx else [(None, ())], sizes, names):
            tasks.append(Task(path, bound, batch, capacity, planner,
                              _settings(planner, time_limit, heuristic_time_limit, seed,
                                        threads, alignment, options.get(planner, {}))))
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
    """The parsed ONNX file (one parse for all the shapes of a model on this worker)."""
    from memplan.frontends.onnx_graph import load_model

    return load_model(path)


@lru_cache(maxsize=8)
def _load(path: str, stamp: tuple[int, int], dims: tuple, batch: int | None,
          alignment: int | None):
    """The problem of one model file at one shape; ``stamp`` (mtime, size) keys a changed file."""
    from memplan.api import load

    if Path(path).suffix.lower() != ".onnx":
        return load(path, alignment=alignment)
    from memplan.frontends.onnx import from_onnx
    from memplan.frontends.onnx_batch import rebatch

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
        settings.setdefault("workers", threads)
    if task.planner == SOLVE:
        plan = solve(problem, **settings)  # validated by solve
    else:
        plan = plan_with(task.planner, problem, **settings)
    violations = [v for v in validate(problem, plan)
                  if not (v.kind == "capacity" and not fits(plan))]
    if violations:
        raise InvalidPlanError(violations)
    return plan


def run_task(task: Task) -> dict[str, Any]:
    """Load, plan and validate one task where it runs; its row (errors included, never raised)."""
    began = time.perf_counter()
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
        row.update(arena_size=plan.arena_size, best_bound=plan.best_bound, status=plan.status,
                   gap=plan.gap, seconds=plan.seconds, valid=True,
                   winner=plan.stats.get("winner", plan.planner))
    except Exception as error:  # the row says what went wrong; the sweep goes on
        if task.capacity not in (FROM_FILE, None):
            row.setdefault("capacity", task.capacity)
        row.update(status="error", error=f"{type(error).__name__}: {error}")
    row.update(total_seconds=time.perf_counter() - began,
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


# ------------------------------------------------------------------ the engine
def dask_setup(worker) -> None:
    """Worker preload (``preload=["memplan.sweep"]``): Ctrl-C is the client's to handle.

    A terminal sends SIGINT to the whole process group, local workers
    included; they ignore it, so that the client cancels what is left and
    closes the cluster in order (no worker tracebacks, no lost rows).
    """
    import signal
    import threading

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)


@contextmanager
def _engine(client, scheduler: str | None, workers: int | None):
    """The Dask client to use: the caller's, one on ``scheduler``, or a local cluster's."""
    if client is not None:
        yield client
        return
    import logging

    from distributed import Client, LocalCluster

    if scheduler is not None:
        with Client(scheduler, timeout="20s") as connected:
            yield connected
        return
    with LocalCluster(n_workers=workers or os.cpu_count() or 1, threads_per_worker=1,
                      processes=True, dashboard_address=":0", silence_logs=logging.CRITICAL,
                      preload=["memplan.sweep"]) \
            as cluster, Client(cluster) as local:
        yield local


def sweep(models: Iterable[str | os.PathLike], *,
          dims: Mapping[str, Sequence[int]] | None = None,
          batches: Sequence[int] | None = None,
          capacities: Sequence[int | str | None] | None = None,
          planners: Sequence[str] = ("best",), time_limit: float | None = 10.0,
          heuristic_time_limit: float = 1.0, seed: int = 0, threads: int = 1,
          alignment: int | None = None,
          options: Mapping[str, Mapping[str, Any]] | None = None, client: Any = None,
          scheduler: str | None = None, workers: int | None = None,
          out: str | os.PathLike | None = None, resume: bool = True,
          retries: int = 1, progress: Any = None,
          on_row: Callable[[dict[str, Any]], None] | None = None) -> pd.DataFrame:
    """Plan every combination as a Dask task; one row per task (see the module docstring).

    ``dims`` maps an ONNX symbol to its values (``{"seq": [128, 512]}``);
    ``batches`` re-batches ONNX models; ``capacities`` are bytes, strings with
    units (``"256KiB"``), None (minimise) or ``"file"`` (the file's own; the
    default). ``time_limit`` is the exact planner's (and ``solve``'s),
    ``heuristic_time_limit`` the searching heuristics'; ``threads`` CP-SAT
    threads per exact task; ``options`` a planner's own options by planner name
    (``{"hill_climb": {"iterations": 500}}``). The engine: ``client`` (a `distributed.Client`),
    else a cluster at ``scheduler`` (``tcp://host:port``), else a local
    cluster of ``workers`` processes (default: one per core). ``out`` (.csv or
    .parquet) gets the rows as they arrive; with ``resume`` the tasks whose
    rows it holds are not run again. ``progress``: a `memplan.sweep_report.SweepProgress`
    or any object with ``start(total, done)``, ``update(row, running)`` and
    ``close()``. ``on_row(row)`` is called on the client for each new row.
    The DataFrame's ``attrs`` hold ``interrupted``, ``skipped`` (rows taken
    from ``out``), ``ran``, ``tasks``, ``wall_seconds``, ``startup_seconds`` (until
    the engine was ready) and ``workers``.
    """
    import pandas as pd

    began = time.perf_counter()
    tasks = make_tasks(models, dims=dims, batches=batches, capacities=capacities,
                       planners=planners, time_limit=time_limit,
                       heuristic_time_limit=heuristic_time_limit, seed=seed, threads=threads,
                       alignment=alignment, options=options)
    writer = RowWriter(out) if out is not None else None
    earlier = writer.existing() if writer is not None and resume else {}
    todo = [task for task in tasks if task.key not in earlier]
    rows: dict[str, dict[str, Any]] = {}
    interrupted, nworkers, startup = False, 0, 0.0
    try:
        if todo:
            with _engine(client, scheduler, workers) as engine:
                startup = time.perf_counter() - began
                nworkers = len(engine.scheduler_info().get("workers", {}))
                interrupted = _run(engine, todo, rows, writer, progress, retries, on_row,
                                   len(tasks) - len(todo))
    finally:
        if writer is not None:
            writer.close()
    found = {**earlier, **rows}
    table = pd.DataFrame([found[t.key] for t in tasks if t.key in found], columns=list(COLUMNS))
    table = table.astype(COLUMNS)
    table.attrs.update(interrupted=interrupted, skipped=len(tasks) - len(todo), ran=len(rows),
                       wall_seconds=time.perf_counter() - began, startup_seconds=startup,
                       workers=nworkers,
                       tasks=len(tasks))
    return table


def _run(engine, todo: list[Task], rows: dict, writer, progress, retries: int, on_row,
         done_before: int) -> bool:
    """Submit ``todo`` and collect rows as they finish; True when Ctrl-C stopped it."""
    from distributed import wait
    from distributed.client import FIRST_COMPLETED

    run = f"memplan-sweep-{os.getpid()}-{time.time_ns():x}"  # unique keys on a shared cluster
    futures = {engine.submit(run_task, task, key=f"{run}-{i}", pure=False, retries=retries): task
               for i, task in enumerate(todo)}
    pending = set(futures)
    if progress is not None:
        progress.start(len(todo) + done_before, done_before)
    try:
        while pending:
            try:
                finished, pending = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
            except TimeoutError:
                finished = set()
            for future in finished:
                row = _row_of(future, futures[future])
                rows[row["task"]] = row
                if writer is not None:
                    writer.append(row)
                if on_row is not None:
                    on_row(row)
                if progress is not None:
                    progress.update(row, _running(engine, len(pending)))
            if progress is not None and not finished:
                progress.update(None, _running(engine, len(pending)))
        return False
    except KeyboardInterrupt:
        engine.cancel(list(pending))
        return True
    finally:
        if progress is not None:
            progress.close()


def _row_of(future, task: Task) -> dict[str, Any]:
    """The task's row; a task Dask gave up on (a worker died too often) an error row."""
    if future.status == "finished":
        return future.result()
    try:
        error = future.exception()
    except Exception as why:  # cancelled
        error = why
    return finish_row({"task": task.key, "model": task.model, "path": task.path,
                       "bindings": task.bindings, "batch": task.batch, "planner": task.planner,
                       "capacity": task.capacity if isinstance(task.capacity, int) else None,
                       "status": "error", "error": f"{type(error).__name__}: {error}"})


def _running(engine, pending: int) -> int:
    """Tasks running now: those the workers are processing (at most one per thread)."""
    try:
        threads = sum(engine.nthreads().values())
    except Exception:  # the scheduler is busy or gone: an estimate is enough
        threads = pending
    return min(pending, threads)


def human_capacity(value: int | None) -> str:
    return "none" if value is None else human_bytes(int(value))


__all__ = ["ALL", "FROM_FILE", "SOLVE", "Task", "human_capacity", "make_tasks", "model_files",
           "parse_size", "planner_names", "run_task", "sweep"]
