"""Importing CP-SAT within a time limit.

Why: ``import ortools.sat.python.cp_model`` (which brings protobuf and pandas)
takes about half a second on a quiet machine and several seconds on a busy
one: more than a whole short time limit. The exact planner imports the
modules that need CP-SAT only when a search needs them, and through
`import_within`, which waits for the import no longer than the time left:

- a module already imported is returned at once;
- with less than `CP_IMPORT_SECONDS` given, no import starts (None): it could not
  finish, and a thread importing in the background would slow the caller's
  last steps (it holds the interpreter most of the time);
- otherwise one daemon thread per module imports it (a second call joins the
  same thread), and the caller waits at most ``seconds``;
- done in time: the module; not done: None (the caller keeps what it has
  and says so), while the import goes on in the background, so that a later
  call finds it done; an import that failed raises its error in the caller.

Cost: the import itself, once per process.
"""

from __future__ import annotations

import importlib
import sys
import threading
from types import ModuleType

from memplan.shares import CP_IMPORT_SECONDS

_imports: dict[str, tuple[threading.Thread, list]] = {}  # module -> (thread, [error])
_lock = threading.Lock()


def import_within(module: str, seconds: float | None) -> ModuleType | None:
    """``module`` once imported, if that takes at most ``seconds`` (None: however long)."""
    if module in sys.modules and module not in _imports:
        return sys.modules[module]
    with _lock:
        if module not in _imports:
            if seconds is not None and seconds < CP_IMPORT_SECONDS:
                return None
            failure: list = []

            def load() -> None:
                try:
                    importlib.import_module(module)
                except BaseException as error:  # noqa: BLE001  raised again in the caller
                    failure.append(error)

            thread = threading.Thread(target=load, name=f"memplan-import-{module}",
                                      daemon=True)
            _imports[module] = (thread, failure)
            thread.start()
        thread, failure = _imports[module]
    thread.join(None if seconds is None else max(0.0, seconds))
    if thread.is_alive():
        return None
    if failure:
        raise failure[0]
    return sys.modules[module]
