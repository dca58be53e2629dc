"""memplan: ahead-of-time memory planning for neural networks.

Every tensor gets an offset in one arena; the arena is as small as it can
be, and memplan says how far from optimal each plan is.
"""

import memplan.heuristics  # noqa: F401  (fills the registry)
import memplan.solver  # noqa: F401
from memplan.api import compare, from_onnx, load, solve, solve_report
from memplan.bounds import live_bytes, load_profile, lower_bound
from memplan.errors import (
    InvalidPlanError,
    MemplanError,
    NoPlanError,
    ProblemError,
    UnknownPlannerError,
)
from memplan.plan import Plan
from memplan.problem import Alias, Buffer, Problem, Region
from memplan.registry import plan_with, planners, register
from memplan.sweep import sweep  # memplan.sweep is this function (from memplan.sweep import ...)
from memplan.validate import Violation, check, validate
from memplan.viz import plot_comparison, plot_layout, plot_memory

__version__ = "0.1.0"

__all__ = [
    "Alias", "Buffer", "InvalidPlanError", "MemplanError", "NoPlanError", "Plan", "Problem",
    "ProblemError", "Region", "UnknownPlannerError", "Violation", "check", "compare",
    "from_onnx", "live_bytes", "load", "load_profile", "lower_bound", "plan_with", "planners",
    "plot_comparison", "plot_layout", "plot_memory", "register", "solve", "solve_report",
    "sweep", "validate",
]
