"""The live line shown while the exact planner runs on a terminal.

An exact search may take its whole time limit; a user watching it wants to
see that it moves. One line on stderr, redrawn a few times a second::

    exact  best 1.214 MiB  bound 963 KiB  gap 22.5%  3.2/10 s  Ctrl-C: keep best

- the planner's ``on_progress`` callback updates incumbent (its best arena
  size so far) and bound (the best proven lower bound);
- the elapsed time (the planner's, from its last report on) ticks on its own:
  rich redraws the line, so a search that finds nothing new shows it is alive;
- on a pipe or with ``--quiet`` there is no line at all, and the line is
  erased when the search ends, leaving only the summary;
- Ctrl-C: `memplan.stopping.stop_on_ctrl_c` (around every command).
"""

from __future__ import annotations

import sys
from typing import Any, TextIO

from rich.text import Text

from memplan.budget import Stopwatch
from memplan.plan import gap_of
from memplan.viz import human_bytes


def on_terminal(stream: TextIO | None = None) -> bool:
    """True when ``stream`` (default stderr) is an interactive terminal, not a pipe or file."""
    stream = sys.stderr if stream is None else stream
    return hasattr(stream, "isatty") and stream.isatty()


class LiveLine:
    """A context manager and ``on_progress`` callback drawing the live line.

    ``LiveLine(time_limit)`` used as ``with line: solve(..., on_progress=line)``.
    Disabled (``enabled=False``), it only records the last values.
    """

    def __init__(self, time_limit: float | None = None, *, enabled: bool = True,
                 stream: TextIO | None = None):
        self.time_limit = time_limit
        self.enabled = enabled
        self.stream = sys.stderr if stream is None else stream
        self.incumbent: int | None = None
        self.bound: int | None = None
        self.watch = Stopwatch()
        self._live: Any = None

    def __call__(self, progress: Any) -> None:
        """Take the planner's news (`memplan.solver.exact_options.Progress`)."""
        self.incumbent = progress.arena_size
        self.bound = progress.best_bound
        self.watch = Stopwatch(ago=progress.seconds)  # the planner's own clock

    def line(self) -> Text:
        """The line as it is drawn now; cut at the terminal's width, never wrapped."""
        elapsed = self.watch.elapsed()
        if self.bound is None:  # heuristics, or the exact planner before its first news
            parts = ["planning", f"{elapsed:.1f} s"]
        else:
            best = "-" if self.incumbent is None else human_bytes(self.incumbent)
            parts = ["exact", f"best {best}", f"bound {human_bytes(self.bound)}"]
            if self.incumbent:
                parts.append(f"gap {gap_of(self.incumbent, self.bound):.1%}")
            limit = f"/{self.time_limit:g}" if self.time_limit else ""
            parts += [f"{elapsed:.1f}{limit} s", "Ctrl-C: keep best"]
        return Text("  ".join(parts), no_wrap=True, overflow="ellipsis")

    def __rich__(self) -> Text:
        return self.line()

    def __enter__(self) -> LiveLine:
        self.watch = Stopwatch()
        if self.enabled:
            from rich.console import Console
            from rich.live import Live

            console = Console(file=self.stream, highlight=False)
            self._live = Live(self, console=console, refresh_per_second=4, transient=True)
            self._live.start()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
