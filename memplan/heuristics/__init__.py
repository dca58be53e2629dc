"""Heuristic planners: fast plans, upper bounds and warm starts. One module per strategy.

`units` (alias groups and conflicting pairs), `order` and `placement` are the
parts; the planner modules compose them and register themselves on import.
"""

from memplan.heuristics import (  # noqa: F401  (each module registers its planners)
    best,
    genetic,
    greedy,
    hill_climb,
    pools,
    shared_objects,
    time_sweep,
)
