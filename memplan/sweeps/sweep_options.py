"""`SweepOptions`: what `memplan.sweep` plans and where, one record for the library and the CLI.

One frozen dataclass, each field with its one-line help in its metadata
(`memplan.options.option`) and the best setting as default; ``memplan
sweep`` builds its options from these fields (`memplan.cli.sweep`), so the
library and the command line say the same thing with the same default. The
values are checked where they are used (`memplan.sweeps.sweep_tasks.make_tasks`:
time limits, threads, capacities, planners; `memplan.sweeps.sweep.scheduler_address`),
before any task runs. Lists may come as any sequence; they are kept as tuples.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from memplan.options import option
from memplan.sweeps.sweep_tasks import FROM_FILE


@dataclass(frozen=True)
class SweepOptions:
    """How `memplan.sweep` plans its models; ``memplan sweep``'s options are built from it."""

    dims: Mapping[str, tuple[int, ...]] | None = option(
        None, "values of each symbolic ONNX dimension, by name ({'seq': (128, 512)})")
    batches: tuple[int, ...] | None = option(
        None, "re-batch ONNX models: the leading dimension of the graph inputs")
    capacities: tuple[int | str | None, ...] = option(
        (FROM_FILE,), "capacities: bytes or with a unit (256KiB, 1MiB), 'none' to minimise, "
        "'file' for the file's own")
    planners: tuple[str, ...] = option(
        ("best",), "registered planners, 'solve' (heuristics then exact), 'all' (every "
        "heuristic and exact)")
    alignment: int | None = option(None, "align every offset to this many bytes (64, 4KiB)")
    time_limit: float | None = option(10.0, "seconds for each exact (or solve) task ('none')")
    heuristic_time_limit: float | None = option(1.0, "seconds for each searching heuristic")
    seed: int = option(0, "random seed of every planner")
    threads: int = option(1, "CP-SAT threads per exact task (tasks run in parallel)")
    planner_options: Mapping[str, Mapping[str, Any]] | None = option(
        None, "a planner's own options by planner name ({'hill_climb': {'iterations': 500}})")
    workers: int | None = option(
        None, "worker processes of the local cluster (default: one per core)")
    scheduler: str | None = option(
        None, "the address of a running Dask cluster to use instead of a local one")
    retries: int = option(
        1, "re-runs of a task that raised (a dead worker's tasks are re-run by Dask, up to "
        "its allowed-failures, 3 by default)")
    out: str | None = option(
        None, "write rows as they finish (.csv or .parquet); the same sweep again resumes")
    resume: bool = option(True, "skip the tasks whose rows the output file already holds")
    plans: str | None = option(
        None, "a folder (the workers must see it) where each task writes its plan, for the "
        "report's plan views")

    def __post_init__(self):
        for name in ("batches", "capacities", "planners"):  # any sequence: kept as a tuple
            value = getattr(self, name)
            if value is not None and not isinstance(value, tuple):
                object.__setattr__(self, name, (value,) if isinstance(value, str | int)
                                   else tuple(value))
        if self.dims is not None:
            object.__setattr__(self, "dims", {name: tuple(values)
                                              for name, values in dict(self.dims).items()})
        for name in ("out", "plans"):  # paths: kept as text
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, str(value))

