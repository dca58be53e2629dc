"""What real deployments add on top of any planner: memory regions, scratch
workspaces, several models in one arena, and the runtime's allocation events.

Layer 3: may import the vocabulary and its layer (problem, plan, bounds,
validate, groups, registry), the planners (heuristics/, solver/) and
the readers; never api or cli. Modules: `regions` (heuristic region choice),
`regions_exact` (CP-SAT region choice), `scratch` and `scratch_exact`
(scratch buffers in a plan's free space), `multimodel` (several models),
`replay` (allocation and release events per step).
"""
