"""The runner: every (problem, mode, planner) of the chosen suites, each run in a fresh process.

Steps:
- list the tasks: the suites' cases x the modes each one has x the planners x
  ``repeat`` runs, in that order (so a problem's planners run side by side);
- run each task as ``python -m benchmarks.worker`` with a hard timeout; kill
  its process group when the timeout passes (status ``TIMEOUT``) and report a
  worker that died without a result (status ``CRASHED``, with its stderr);
- append every raw result to ``raw.jsonl`` as it comes, so that a long run
  that is stopped keeps what it measured;
- `summarise`: one row per (problem, mode, planner): medians over the runs.

Runs go one at a time by default (``jobs=1``): two runs side by side on a
2-core machine disturb each other's timings.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.suites import REPO, cases
from benchmarks.worker import RESULT_PREFIX, SETUP_PREFIX

PLAN_STATUSES = ("optimal", "feasible", "infeasible", "unknown")  # a valid plan came back


@dataclass(frozen=True)
class Settings:
    """What to run; the CLI fills it from its flags."""

    suites: tuple[str, ...]  # suite names, see benchmarks.suites.SUITES
    planners: tuple[str, ...]  # registered planner names
    problems: tuple[str, ...] = ()  # only these problems of the suites; () = all
    modes: tuple[str, ...] = ("fit",)  # fit: keep the capacity; minimise: drop it
    time_limit: float | None = None  # passed to every planner; None = its own default
    repeat: int = 1  # runs per (problem, mode, planner); the table quotes medians
    seed: int = 0  # passed to every planner
    options: dict[str, Any] = field(default_factory=dict)  # extra planner options
    hard_timeout: float | None = None  # kill a run after this; None = 3 * limit + 60, or 600
    jobs: int = 1  # runs at the same time
    imports: tuple[str, ...] = ()  # modules or .py files the workers import (more planners)

    def timeout(self) -> float:
        if self.hard_timeout is not None:
            return self.hard_timeout
        return 600.0 if self.time_limit is None else 3 * self.time_limit + 60


def tasks(settings: Settings) -> list[dict[str, Any]]:
    """Every run to make, as the JSON-able task a worker takes."""
    found = []
    listed = {case.name for suite in settings.suites for case in cases(suite)}
    unknown = sorted(set(settings.problems) - listed)
    if unknown:
        raise KeyError(f"no problem {unknown[0]!r} in {', '.join(settings.suites)}; "
                       f"valid: {', '.join(sorted(listed))}")
    for suite in settings.suites:
        for case in cases(suite):
            if settings.problems and case.name not in settings.problems:
                continue
            for mode in case.modes(settings.modes):
                for planner in settings.planners:
                    for run in range(settings.repeat):
                        found.append(dict(suite=suite, case=case.name, mode=mode,
                                          planner=planner, time_limit=settings.time_limit,
                                          seed=settings.seed, options=settings.options,
                                          imports=settings.imports, run=run))
    return found


def run_task(task: dict[str, Any], timeout: float) -> dict[str, Any]:
    """One task in a fresh worker process; always returns a result, whatever happens."""
    began = time.perf_counter()
    worker = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.worker", json.dumps(task)], cwd=REPO,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        stdout, stderr = worker.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        os.killpg(worker.pid, signal.SIGKILL)
        stdout, stderr = worker.communicate()
        timed_out = True
    reported = {prefix: json.loads(line[len(prefix):]) for line in stdout.splitlines()
                for prefix in (SETUP_PREFIX, RESULT_PREFIX) if line.startswith(prefix)}
    result = reported.get(RESULT_PREFIX) or dict(reported.get(SETUP_PREFIX) or task)
    result["process_seconds"] = time.perf_counter() - began
    if timed_out:
        result.update(status="TIMEOUT", error=f"killed after the hard timeout of {timeout:g} s")
    elif RESULT_PREFIX not in reported:
        tail = " | ".join(stderr.strip().splitlines()[-3:])
        result.update(status="CRASHED", error=f"worker exited with code {worker.returncode} "
                                               f"and no result: {tail}")
    return result


def run_all(settings: Settings, out_dir: Path,
            progress: Callable[[str], None] = lambda line: None) -> list[dict[str, Any]]:
    """Run every task of ``settings``; raw results go to ``out_dir/raw.jsonl`` as they come."""
    todo = tasks(settings)
    out_dir.mkdir(parents=True, exist_ok=True)
    raw_path = out_dir / "raw.jsonl"
    raw_path.write_text("")

    def one(numbered: tuple[int, dict[str, Any]]) -> dict[str, Any]:
        number, task = numbered
        result = run_task(task, settings.timeout())
        with raw_path.open("a") as raw:
            raw.write(json.dumps(result, default=str) + "\n")
        progress(f"[{number + 1}/{len(todo)}] {task['suite']}/{task['case']} {task['mode']} "
                 f"{task['planner']}: {result['status']} arena {result.get('arena_size')} "
                 f"in {result.get('seconds', 0):.3f} s")
        return result

    with ThreadPoolExecutor(max_workers=max(1, settings.jobs)) as pool:
        return list(pool.map(one, enumerate(todo)))


def _status(statuses: Iterable[str]) -> str:
    counts = Counter(statuses)
    if len(counts) == 1:
        return next(iter(counts))
    total = sum(counts.values())
    return ", ".join(f"{status} {count}/{total}" for status, count in counts.most_common())


def _median(runs: list[dict[str, Any]], name: str, *, low: bool = False):
    """The median of ``name`` over the runs that have it (the lower one: a value some run had)."""
    values = [r[name] for r in runs if r.get(name) is not None]
    if not values:
        return None
    return statistics.median_low(values) if low else statistics.median(values)


def summarise(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (suite, problem, mode, planner), in the order they ran.

    Sizes and bounds are the lower median over the runs that returned a valid
    plan (a value some run actually had); times and memory are medians. A row
    with any invalid, crashed or timed-out run shows it in its status.
    """
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for result in results:
        key = (result["suite"], result["case"], result["mode"], result["planner"])
        groups.setdefault(key, []).append(result)
    rows = []
    for (suite, case, mode, planner), runs in groups.items():
        good = [r for r in runs if r["status"] in PLAN_STATUSES]
        known = next((r for r in runs if "buffers" in r), {})
        arena = _median(good, "arena_size", low=True)
        lower = known.get("lower_bound")
        rows.append(dict(
            suite=suite, problem=case, mode=mode, buffers=known.get("buffers"),
            capacity=known.get("capacity"), lower_bound=lower, planner=planner,
            arena_size=arena, ratio=arena / lower if arena and lower else None,
            status=_status(r["status"] for r in runs),
            best_bound=_median(good, "best_bound", low=True), gap=_median(good, "gap"),
            seconds=_median(runs, "seconds"), peak_rss_mb=_median(runs, "peak_rss_mb"),
            base_rss_mb=_median(runs, "base_rss_mb"), runs=len(runs),
            note=next((r["error"] for r in runs if r.get("error")), None)))
    return rows


def is_alarming(row: dict[str, Any]) -> bool:
    """A row that must not pass unnoticed: an invalid plan or one below the lower bound."""
    return "INVALID" in row["status"] or "BELOW-BOUND" in row["status"]
