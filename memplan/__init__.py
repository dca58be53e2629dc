"""memplan: ahead-of-time memory planning for neural networks.

Every tensor gets an offset in one arena; the arena is as small as it can
be, and memplan says how far from optimal each plan is.

The package is a stack of layers; a module imports only layers below its own
(tests/test_architecture.py checks it, also for imports inside functions;
docs/explanation/architecture.md draws it)::

    5  cli/                                            the command
    4  api, viz, diagnosis/, sweeps/, proofs, passes   the library's entry points
    3  deploy/   schedule/   the writers               on top of any planner
    2  heuristics/   solver/   the readers             side by side, never each other
    1  bounds, plan, groups, validate, options, registry
    0  errors, limits, problem, budget                 the vocabulary

A compiler's reader, writer, proof and pass sit in one folder (onnx/,
tflite/, executorch/, tvm/); formats/ holds the files of no compiler.

This ``__init__`` is at layer 4: it may import anything but cli/, and imports the
planner packages so that the registry is full.
"""

import memplan.startup  # noqa: F401  (first: a quiet Ctrl-C while the rest imports)

# isort: split
import memplan.heuristics  # noqa: F401  (fills the registry)
import memplan.solver  # noqa: F401
from memplan import moved
from memplan.api import (
    compare,
    from_executorch,
    from_onnx,
    from_relax,
    from_tflite,
    load,
    solve,
    solve_report,
)
from memplan.bounds import live_bytes, load_profile, lower_bound
from memplan.diagnosis.explain import explain  # the function: memplan.explain(problem, plan=None)
from memplan.errors import (
    HintWarning,
    InvalidPlanError,
    MemplanError,
    NoPlanError,
    ProblemError,
    UnknownPlannerError,
    UnsoundBoundError,
)
from memplan.plan import Plan
from memplan.problem import Alias, Buffer, Problem, Region, Step
from memplan.registry import plan_with, planners, register
from memplan.sweeps.sweep import sweep  # memplan.sweep is this function
from memplan.sweeps.sweep_options import SweepOptions
from memplan.validate import Violation, check, validate
from memplan.viz import plot_comparison, plot_layout, plot_memory

moved.install()  # the old names of moved modules (`memplan.moved`), for one more release

__version__ = "0.1.0"  # the one place: pyproject.toml reads it, `memplan --version` prints it

__all__ = [
    "Alias", "Buffer", "HintWarning", "InvalidPlanError", "MemplanError", "NoPlanError", "Plan",
    "Problem", "ProblemError", "Region", "Step", "SweepOptions", "UnknownPlannerError",
    "UnsoundBoundError", "Violation", "check", "compare", "explain", "from_executorch",
    "from_onnx", "from_relax", "from_tflite", "kernels", "live_bytes", "load", "load_profile",
    "lower_bound", "plan_with", "planners", "plot_comparison", "plot_layout", "plot_memory",
    "register", "reorder", "solve", "solve_report", "sweep", "validate",
]


def kernels() -> dict[str, bool]:
    """Which compiled C kernels are loaded: the exact planner's canonical search, the
    heuristics' placement pass and their order search, the validator's sweep, the ONNX
    reader's field walk (without them plans come slower, from Python, the order search is
    the Python hill climb, the validation of 10^6 buffers takes seconds more, and the ONNX
    reader's memory bound is not checked). The ONNX one is only found, not loaded:
    loading it imports onnx."""
    from importlib import import_module
    from importlib.util import find_spec

    from memplan.heuristics import anneal, compiled_place
    from memplan.solver import canonical

    checker = import_module("memplan.validate")  # memplan.validate: the function
    return {"canonical": canonical.available(), "placement": compiled_place.available(),
            "search": anneal.compiled(),
            "validation": checker._compiled_any_overlap is not None,
            "onnx_reader": find_spec("memplan.onnx._onnx_strip") is not None}


if not all(kernels().values()):  # once per process: the import runs once
    import warnings

    warnings.warn("memplan's compiled kernels are not loaded (" + ", ".join(
        k for k, v in kernels().items() if not v) + "): plans are the same but slower; "
        "reinstall with a C compiler ('memplan info' shows the kernels)", RuntimeWarning,
        stacklevel=2)


def __getattr__(name: str):
    """``memplan.reorder``: imported on first use (the order search is not needed to plan)."""
    if name == "reorder":
        from memplan.schedule.operator_order import reorder

        return reorder
    raise AttributeError(f"module 'memplan' has no attribute {name!r}")
