"""Ctrl-C in a command: the best plan so far, within a second, whatever runs.

A command's SIGINT handler (`stop_on_ctrl_c`, around every command) sets a stop
event (`threading.Event`). Code that watches that event itself marks it for
its run with `watched`: the exact planner, whose CP-SAT threads look at it
every few dozen milliseconds and return their best plan. Everywhere else
(the heuristics, passes in C between two looks at the clock, explain's
analysis) the first Ctrl-C also raises ``KeyboardInterrupt`` in the main
thread (`on_ctrl_c`): the heuristics catch it and return their best plan so
far (``stats["interrupted"]``), and the command then ends with exit 130. A
second Ctrl-C always raises.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_WATCHERS = "memplan_watchers"  # an attribute of the event: how many runs watch it now


@contextmanager
def watched(stop: threading.Event | None) -> Iterator[None]:
    """While inside, a Ctrl-C only sets ``stop`` (the code inside looks at it)."""
    if stop is None:
        yield
        return
    setattr(stop, _WATCHERS, getattr(stop, _WATCHERS, 0) + 1)
    try:
        yield
    finally:
        setattr(stop, _WATCHERS, getattr(stop, _WATCHERS, 1) - 1)


def on_ctrl_c(stop: threading.Event) -> None:
    """What a Ctrl-C does: set ``stop``; raise ``KeyboardInterrupt`` unless a run watches
    ``stop`` (`watched`), or when it was set already (a second Ctrl-C)."""
    if stop.is_set() or not getattr(stop, _WATCHERS, 0):
        stop.set()
        raise KeyboardInterrupt
    stop.set()


def stopped(stop: threading.Event | None) -> bool:
    """Whether ``stop`` was given and set."""
    return stop is not None and stop.is_set()


@contextmanager
def stop_on_ctrl_c() -> Iterator[threading.Event]:
    """An event that the first Ctrl-C sets (`on_ctrl_c`); outside the main thread, where
    signal handlers cannot be set, it is never set."""
    stop = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    previous = signal.signal(signal.SIGINT, lambda signum, frame: on_ctrl_c(stop))
    try:
        yield stop
    finally:
        signal.signal(signal.SIGINT, previous)
