"""The progress bar of a sweep, and its summary at the end.

A sweep runs for minutes to hours; its user wants to see that it moves and
whether tasks fail, without reading rows. On a terminal, one rich bar on
stderr::

    sweep ━━━━━━━━━━━━━━━━━━━━ 48/120  done 48  running 2  failed 1  0:00:31  ETA 0:00:46

(rows taken from an earlier run count as done from the start). `summary`
gives the lines printed at the end: tasks by status, the errors (first few),
wall time and rate, and where the rows went.
"""

from __future__ import annotations

import sys
from typing import Any, TextIO


class SweepProgress:
    """A rich progress bar fed by `memplan.sweeps.sweep.sweep` (``progress=SweepProgress()``)."""

    def __init__(self, stream: TextIO | None = None):
        self.stream = sys.stderr if stream is None else stream
        self.done = self.failed = self.running = 0
        self._progress: Any = None
        self._task: Any = None

    def start(self, total: int, done: int) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.done = done
        self._progress = Progress(
            TextColumn("sweep"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
            TextColumn("done {task.fields[done]}  running {task.fields[running]}  "
                       "failed {task.fields[failed]}"),
            TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
            console=Console(file=self.stream), transient=False)
        self._progress.start()
        self._task = self._progress.add_task("sweep", total=total, completed=done,
                                             done=done, running=0, failed=0)

    def update(self, row: dict[str, Any] | None, running: int) -> None:
        if row is not None:
            self.done += 1
            self.failed += row.get("status") == "error"
        self.running = running
        if self._progress is not None:
            self._progress.update(self._task, completed=self.done, done=self.done,
                                  running=running, failed=self.failed)

    def close(self) -> None:
        if self._progress is not None:
            self._progress.update(self._task, running=0)
            self._progress.stop()
            self._progress = None


def summary(table, *, out: str | None = None) -> list[str]:
    """The lines that close a sweep: counts by status, errors, time, where the rows are."""
    attrs = table.attrs
    counts = table["status"].value_counts()
    statuses = ", ".join(f"{int(counts[s])} {s}" for s in
                         ("optimal", "feasible", "infeasible", "unknown", "error") if s in counts)
    total = attrs.get("tasks", len(table))
    lines = [f"tasks       {len(table)} of {total} ({statuses or 'none run'})"]
    if attrs.get("skipped"):
        lines.append(f"resumed     {attrs['skipped']} rows were already in {out}")
    wall = attrs.get("wall_seconds")
    if wall is not None and attrs.get("ran"):
        start = attrs.get("startup_seconds", 0.0)
        starting = f"{start:.1f} s to start them, then " if start >= 0.1 else ""
        lines.append(f"ran         {attrs['ran']} tasks in {wall:.1f} s on {attrs.get('workers')} "
                     f"workers ({starting}{attrs['ran'] / max(wall - start, 1e-9):.1f} tasks/s)")
    valid = table["valid"].fillna(False).sum()
    planned = table["arena_size"].notna().sum()
    lines.append(f"validated   {valid} of {planned} plans on their workers")
    errors = table[table["status"] == "error"]
    for row in errors.head(5).itertuples():
        where = f"{row.model} {row.bindings} {row.planner}".replace("  ", " ")
        lines.append(f"error       {where}: {row.error}")
    if len(errors) > 5:
        lines.append(f"error       ... and {len(errors) - 5} more (the 'error' column)")
    if attrs.get("interrupted"):
        lines.append("interrupted Ctrl-C: the finished rows are kept"
                     + ("; run the same command again to resume" if out else ""))
    if out:
        lines.append(f"wrote       {out}")
    return lines


__all__ = ["SweepProgress", "summary"]
