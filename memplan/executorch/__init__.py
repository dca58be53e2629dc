"""memplan inside ExecuTorch: its memory planning pass, or one algorithm of its suite.

Needs the ``executorch`` extra (``executorch`` and ``torch``)::

    import memplan.executorch
    from executorch.exir import ExecutorchBackendConfig, to_edge

    config = ExecutorchBackendConfig(
        memory_planning_pass=memplan.executorch.memory_planning_pass(time_limit=10))
    program = to_edge(torch.export.export(model, inputs)).to_executorch(config)

or ``MemoryPlanningAlgorithmSuite(algo_list=[greedy, memplan.executorch.algorithm(10)])``
to keep the smaller of the two. `memplan.frontends.executorch_specs` reads the specs,
`memplan.executorch.spec_planner` plans them, `memplan.executorch.planning_pass` is the
pass and its checks.
"""

from memplan.executorch.planning_pass import (
    MemplanPlanningPass,
    memory_planning_pass,
    verify_graph,
)
from memplan.executorch.spec_planner import GraphReport, MemplanAlgorithm, algorithm

__all__ = ["GraphReport", "MemplanAlgorithm", "MemplanPlanningPass", "algorithm",
           "memory_planning_pass", "verify_graph"]
