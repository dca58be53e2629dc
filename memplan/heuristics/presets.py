"""Presets: one registered planner per default options of a shared algorithm.

The one-pass planners are few algorithms under many names: ``greedy_by_size``
and ``first_fit`` are one order-and-place pass with other defaults,
``pool_by_size`` and ``pool_by_lifetime`` one block assignment with another
preference. `register_preset` registers such a name: it parses the options
against the preset's defaults, refuses problems the heuristics cannot plan
(`check_single_region`), runs the algorithm and wraps its offsets into a `Plan`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from memplan.heuristics.units import Units
from memplan.options import parse_options
from memplan.plan import Plan
from memplan.problem import Problem, check_single_region
from memplan.registry import register

Options = TypeVar("Options")
Algorithm = Callable[[Units, Any], tuple[np.ndarray, dict]]  # (offsets, stats)


def register_preset(name: str, defaults: Options, algorithm: Algorithm, summary: str):
    """Register ``algorithm`` with ``defaults`` as the planner ``name``."""

    def plan(problem: Problem, *, time_limit: float | None = None, seed: int = 0,
             hint: Plan | None = None, **options) -> Plan:
        began = time.perf_counter()
        chosen = parse_options(name, defaults, options)
        check_single_region(problem)
        offsets, stats = algorithm(Units.build(problem), chosen)
        return Plan.from_offsets(problem, offsets, planner=name,
                                 seconds=time.perf_counter() - began, stats=stats)

    plan.__name__ = name
    plan.__doc__ = (f"{name}: {summary}. One pass, deterministic: time_limit, seed and hint "
                    f"are unused.")
    plan.options = defaults
    return register(name)(plan)
