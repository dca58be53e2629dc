"""The exact planner: a CP-SAT model that finds and proves optimal layouts.

`exact` registers the planner ``exact``; `preprocess` scales and splits a
problem, `geometry` turns alias groups into boxes, `model` builds the CP-SAT
model of one part, `search` runs it.
"""

from memplan.solver import exact  # noqa: F401  (registers the planner "exact")
from memplan.solver.exact_options import ExactOptions, Progress

__all__ = ["ExactOptions", "Progress"]
