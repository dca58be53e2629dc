"""`Outcome`: what the search of one part ended with (CP-SAT's or the canonical search's).

Its own module so that the exact planner can speak of outcomes without
importing CP-SAT (the canonical search settles most fit problems before
CP-SAT is needed, and importing it costs about a second).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class Outcome:
    """What the search of one part ended with (sizes in the part's scaled units)."""

    status: str  # optimal, feasible, infeasible (proven) or unknown
    offsets: np.ndarray | None  # the best plan found, or None
    bound: int  # proven lower bound on the part's peak
    interrupted: bool = False  # stopped by ``stop`` or Ctrl-C
    stats: dict = field(default_factory=dict)
