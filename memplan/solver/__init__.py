"""The exact planner: a CP-SAT model that finds and proves optimal layouts."""
