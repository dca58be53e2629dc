"""The exact planner: a CP-SAT model that finds and proves optimal layouts.

`exact` registers the planner ``exact``; `preprocess` scales and splits a
problem; in fit mode `canonical` (a compiled complete search) goes first;
`geometry` turns alias groups into boxes, `model` builds the CP-SAT model of
one part, `cp_search` runs it; `cp_params` sets CP-SAT's parameters and the
time shares; `outcome` is a part's result; `exact_options` holds the options
record. `canonical_planner` registers ``canonical``: the canonical descent alone,
without CP-SAT (``best`` runs it by name).

Layer 2: may import layers 0-1 (errors, problem, bounds, plan, groups,
validate, options, registry); never heuristics/ (its warm start comes by
name through the registry), the readers, deploy/ or the top level.
"""

from memplan.solver import (  # noqa: F401  (each registers its planner)
    canonical_planner,
    exact,
    shared_objects_exact,
)
from memplan.solver.exact_options import ExactOptions, Progress

__all__ = ["ExactOptions", "Progress"]
