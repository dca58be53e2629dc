"""`memplan explain`: where the peak comes from, a plan's gap, why a capacity fails.

Top layer: may import everything below (the solver's model for capacity cores).
Modules: `explain` (`memplan.explain`), `explanation` (the record: text, JSON, plots),
`capacity_reason` (live load, or a CP-SAT core shrunk by deletion filtering),
`what_if` (measured remedies).
"""
