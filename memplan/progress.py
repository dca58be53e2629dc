"""The live line shown while the exact planner runs on a terminal.

An exact search may take its whole time limit; a user watching it wants to
see that it moves. One line on stderr, redrawn a few times a second::

    exact  incumbent 1.23 MiB  bound 1.18 MiB  gap 4.1%  elapsed 3.2 s / 10 s

- the planner's ``on_progress`` callback updates incumbent and bound;
- the elapsed time ticks on its own (rich redraws the line), so a search that
  finds nothing new still shows it is alive;
- on a pipe or with ``--quiet`` there is no line at all, and the line is
  erased when the search ends, leaving only the summary.
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

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
        self.began = time.perf_counter()
        self._live: Any = None

    def __call__(self, progress: Any = None, /, **values: Any) -> None:
        """Take the planner's news: an object or keywords with incumbent and bound."""
        for key in ("incumbent", "bound"):
            value = values.get(key, getattr(progress, key, None))
            if value is not None:
                setattr(self, key, int(value))

    def line(self) -> str:
        """The line as text (also what the display redraws)."""
        elapsed = time.perf_counter() - self.began
        limit = f" / {self.time_limit:g} s" if self.time_limit is not None else ""
        parts = ["exact"]
        if self.incumbent is not None:
            parts.append(f"incumbent {human_bytes(self.incumbent)}")
        if self.bound is not None:
            parts.append(f"bound {human_bytes(self.bound)}")
        if self.incumbent and self.bound is not None:
            parts.append(f"gap {(self.incumbent - self.bound) / self.incumbent:.1%}")
        parts.append(f"elapsed {elapsed:.1f} s{limit}")
        if self.time_limit is not None or self.incumbent is not None:
            parts.append("(Ctrl-C keeps the best plan)")
        return "  ".join(parts)

    def __rich__(self) -> str:
        return self.line()

    def __enter__(self) -> LiveLine:
        self.began = time.perf_counter()
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
