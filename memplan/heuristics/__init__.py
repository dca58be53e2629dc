"""Heuristic planners: fast plans, upper bounds and warm starts. One module per strategy.

`units` (alias groups and conflicting pairs), `order` and `placement` are the
parts; the planner modules compose them and register themselves on import.

Layer 2: may import layers 0-1 (errors, problem, bounds, plan, groups,
validate, options, registry); never solver/, the readers, deploy/ or the
top-level modules (docs/explanation/architecture.md).
"""

from memplan.heuristics import (  # noqa: F401  (each module registers its planners)
    anneal,
    best,
    genetic,
    greedy,
    hill_climb,
    long_first,
    long_lived,
    peak_stack,
    pools,
    shared_objects,
    time_sweep,
)
