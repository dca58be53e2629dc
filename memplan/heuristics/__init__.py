"""Heuristic planners: fast plans, upper bounds and warm starts. One module per strategy."""
