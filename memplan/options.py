"""Planner options: one frozen dataclass per planner, filled from keyword arguments.

Every heuristic keeps its options in a frozen dataclass whose defaults are the
best setting (STYLE.md 9), and hangs that default instance on its planner
function as ``plan.options`` so that the CLI and the notebooks can list the
fields, their defaults and their one-line comments. `parse_options` turns the
keyword arguments a planner got into that dataclass, and names the planner and
its valid options when one is unknown (a `TypeError`, like any bad keyword).
"""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any, TypeVar

Options = TypeVar("Options")


def parse_options(planner: str, defaults: Options, options: dict[str, Any]) -> Options:
    """``defaults`` with ``options`` applied; `TypeError` for an option it lacks."""
    valid = [f.name for f in fields(defaults)]
    unknown = sorted(set(options) - set(valid))
    if unknown:
        raise TypeError(f"planner {planner!r} has no option {', '.join(map(repr, unknown))}; "
                        f"valid options: {', '.join(valid) or 'none'}")
    return replace(defaults, **options)
