"""memplan inside ExecuTorch: its memory planning pass, or one algorithm of its suite.

Needs the ``executorch`` extra (``executorch`` and ``torch``)::

    import memplan.executorch
    from executorch.exir import ExecutorchBackendConfig, to_edge

    config = ExecutorchBackendConfig(
        memory_planning_pass=memplan.executorch.memory_planning_pass(time_limit=10))
    program = to_edge(torch.export.export(model, inputs)).to_executorch(config)

or ``MemoryPlanningAlgorithmSuite(algo_list=[greedy, memplan.executorch.algorithm(10)])``
to keep the smaller of the two. With ``banks=`` ExecuTorch's ``TargetMemoryMap`` (fast
and slow memory), every buffer goes to one bank within its size
(`memplan.executorch.banks`). `memplan.executorch.executorch_specs` reads the specs,
`memplan.executorch.spec_planner` plans them, `memplan.executorch.planning_pass` is the
pass and its checks.
"""

from memplan.executorch.banks import BankOverflowError, algorithm, format_bank_report
from memplan.executorch.planning_pass import (
    MemplanPlanningPass,
    memory_planning_pass,
    verify_graph,
)
from memplan.executorch.spec_planner import GraphReport, MemplanAlgorithm

__all__ = ["BankOverflowError", "GraphReport", "MemplanAlgorithm", "MemplanPlanningPass",
           "algorithm", "format_bank_report", "memory_planning_pass", "verify_graph"]
