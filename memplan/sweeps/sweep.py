"""Sweeps: plan a zoo of models across shapes, memory sizes and planners, on Dask.

The questions teams bring to a memory planner come in batches ("how much SRAM
fits all 40 models?", "how does the arena grow with the batch size?", "which
planner wins, and how far from optimal?"): hundreds of independent plans.
`sweep` runs them as Dask tasks, on a local cluster of worker processes by
default or on an existing cluster (``client=`` / ``scheduler=``):

- the tasks are the cross product of models (files, or folders searched for
  ``.onnx``, ``.tflite``, ``.csv``, ``.json``), dimension bindings (``dims``), batch sizes
  (``batches``: `memplan.onnx.onnx_batch.rebatch` rewrites a model whose
  batch is fixed in the file), capacities and planners (a registered planner,
  ``solve`` for the whole `memplan.solve` pipeline, ``all`` for every
  heuristic and ``exact``). Bindings and batches apply to ONNX models only:
  any other model is one task per capacity and planner;
- each task (`memplan.sweeps.sweep_tasks.run_task`) loads its model on the
  worker (a few recent models are kept per worker process: the planners of
  one model share one load),
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
with the columns of `COLUMNS`; `memplan.sweeps.sweep_report` draws and summarises it.
"""

from __future__ import annotations

import os
import re
import uuid
import warnings
from collections.abc import Callable, Iterable, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from memplan.budget import Stopwatch
from memplan.errors import ProblemError, renamed, require
from memplan.options import options_record
from memplan.shares import SWEEP_WATCH_SECONDS
from memplan.sweeps.sweep_io import COLUMNS, RowWriter, finish_row
from memplan.sweeps.sweep_options import SweepOptions
from memplan.sweeps.sweep_tasks import (
    ALL,
    FROM_FILE,
    SOLVE,
    Task,
    make_tasks,
    model_files,
    parse_capacity,
    planner_names,
    run_task,
)

if TYPE_CHECKING:
    import pandas as pd


# ------------------------------------------------------------------ the engine
_ADDRESS = re.compile(r"(?:(?:tcp|tls|ws|wss|ucx)://)?(\[[0-9A-Fa-f:.]+\]|[\w.-]+)(?::(\d{1,5}))?")


def scheduler_address(text: str) -> str:
    """``text`` when it is a Dask scheduler address (``tcp://HOST:PORT``; the port may be left
    out), else `ProblemError`: refused before any task is made, not deep inside Dask."""
    match = _ADDRESS.fullmatch(text.strip())
    if match is None or not 0 < int(match.group(2) or 8786) < 65536:
        raise ProblemError(f"--scheduler: not a Dask scheduler address: {text!r} (expected "
                           f"tcp://HOST:PORT, the port a number from 1 to 65535)")
    return text.strip()


def dask_setup(worker) -> None:
    """Worker preload (``preload=["memplan.sweeps.sweep"]``): Ctrl-C is the client's to handle.

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
                      preload=["memplan.sweeps.sweep"]) \
            as cluster, Client(cluster) as local:
        yield local


def sweep(models: Iterable[str | os.PathLike], options: SweepOptions | None = None, *,
          client: Any = None, progress: Any = None,
          on_row: Callable[[dict[str, Any]], None] | None = None,
          **fields: Any) -> pd.DataFrame:
    """Plan every combination as a Dask task; one row per task (see the module docstring).

    ``options`` is a `SweepOptions` record, or its fields come as keywords:
    ``dims`` maps an ONNX symbol to its values (``{"seq": [128, 512]}``);
    ``batches`` re-batches ONNX models; ``capacities`` are bytes, strings with
    units (``"256KiB"``), None (minimise) or ``"file"`` (the file's own; the
    default). ``time_limit`` is the exact planner's (and ``solve``'s),
    ``heuristic_time_limit`` the searching heuristics'; ``threads`` CP-SAT
    threads per exact task; ``planner_options`` a planner's own options by planner
    name (``{"hill_climb": {"iterations": 500}}``). The engine: ``client`` (a
    `distributed.Client`), else a cluster at ``scheduler`` (``tcp://host:port``), else
    a local cluster of ``workers`` processes (default: one per core). ``out`` (.csv or
    .parquet) gets the rows as they arrive; with ``resume`` the tasks whose rows it
    holds are not run again. ``progress``: a `memplan.sweeps.sweep_progress.SweepProgress`
    or any object with ``start(total, done)``, ``update(row, running)`` and
    ``close()``. ``on_row(row)`` is called on the client for each new row. ``plans``: a
    folder (the workers must see it) where each task writes its plan, for the report's
    plan views (`memplan.sweeps.sweep_plans`).
    The DataFrame's ``attrs`` hold ``interrupted``, ``skipped`` (rows taken
    from ``out``), ``ran``, ``tasks``, ``wall_seconds``, ``startup_seconds`` (until
    the engine was ready) and ``workers``.
    """
    if isinstance(options, Mapping):  # the planners' own options, as this keyword once was
        warnings.warn("sweep(options={planner: {...}}) is deprecated: the planners' own "
                      "options are planner_options=", DeprecationWarning, stacklevel=2)
        options, fields = None, {**fields, "planner_options": options}
    settings = options_record(SweepOptions, options, fields)
    return _sweep(models, settings, client, progress, on_row)


def _sweep(models, settings: SweepOptions, client, progress, on_row) -> pd.DataFrame:
    """`sweep` with its record: make the tasks, skip those ``out`` holds, run the rest."""
    import pandas as pd

    require("distributed", "sweep", "memplan sweep (Dask)")
    watch = Stopwatch()
    scheduler = None if settings.scheduler is None else scheduler_address(settings.scheduler)
    tasks = make_tasks(models, dims=settings.dims, batches=settings.batches,
                       capacities=settings.capacities, planners=settings.planners,
                       time_limit=settings.time_limit,
                       heuristic_time_limit=settings.heuristic_time_limit, seed=settings.seed,
                       threads=settings.threads, alignment=settings.alignment,
                       options=settings.planner_options)
    writer = RowWriter(settings.out) if settings.out is not None else None
    earlier = writer.existing() if writer is not None and settings.resume else {}
    todo = [task for task in tasks if task.key not in earlier]
    rows: dict[str, dict[str, Any]] = {}
    interrupted, nworkers, startup = False, 0, 0.0
    try:
        if todo:
            with _engine(client, scheduler, settings.workers) as engine:
                startup = watch.elapsed()
                nworkers = len(engine.scheduler_info().get("workers", {}))
                if settings.plans is not None:
                    os.makedirs(settings.plans, exist_ok=True)
                interrupted = _run(engine, todo, rows, writer, progress, settings.retries,
                                   on_row, len(tasks) - len(todo), settings.plans)
    finally:
        if writer is not None:
            writer.close()
    found = {**earlier, **rows}
    table = pd.DataFrame([found[t.key] for t in tasks if t.key in found], columns=list(COLUMNS))
    table = table.astype(COLUMNS)
    table.attrs.update(interrupted=interrupted, skipped=len(tasks) - len(todo), ran=len(rows),
                       wall_seconds=watch.elapsed(), startup_seconds=startup,
                       workers=nworkers,
                       tasks=len(tasks))
    return table


def _run(engine, todo: list[Task], rows: dict, writer, progress, retries: int, on_row,
         done_before: int, plans: str | None = None) -> bool:
    """Submit ``todo`` and collect rows as they finish; True when Ctrl-C stopped it."""
    from distributed import wait
    from distributed.client import FIRST_COMPLETED

    run = f"memplan-sweep-{os.getpid()}-{uuid.uuid4().hex[:12]}"  # unique keys on a shared cluster
    futures = {engine.submit(run_task, task, plans, key=f"{run}-{i}", pure=False,
                             retries=retries): task
               for i, task in enumerate(todo)}
    pending = set(futures)
    if progress is not None:
        progress.start(len(todo) + done_before, done_before)
    try:
        while pending:
            try:
                finished, pending = wait(pending, timeout=SWEEP_WATCH_SECONDS,
                                         return_when=FIRST_COMPLETED)
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


__all__ = ["ALL", "FROM_FILE", "SOLVE", "SweepOptions", "Task", "dask_setup", "make_tasks",
           "model_files", "parse_capacity", "planner_names", "run_task", "scheduler_address",
           "sweep"]
__getattr__ = renamed(__name__, {"parse_size": "parse_capacity"})
