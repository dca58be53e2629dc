"""memplan inside ExecuTorch: its memory planning pass, or one algorithm of its suite.

Needs the ``executorch`` extra (``executorch`` and ``torch``)::

    import memplan.executorch
    from executorch.exir import ExecutorchBackendConfig, to_edge

    config = ExecutorchBackendConfig(
        memory_planning_pass=memplan.executorch.memory_planning_pass(time_limit=10))
    program = to_edge(torch.export.export(model, inputs)).to_executorch(config)

or ``MemoryPlanningAlgorithmSuite(algo_list=[greedy, memplan.executorch.algorithm(10)])``
to keep the smaller of the two. With ``regions=`` ExecuTorch's ``TargetMemoryMap`` (fast
and slow memory; each of its banks is a memplan region), every buffer goes to one region
within its size (`memplan.executorch.target_regions`). `memplan.frontends.executorch_specs`
reads the specs, `memplan.executorch.spec_planner` plans them,
`memplan.executorch.planning_pass` is the pass and its checks.
"""

from memplan.errors import renamed
from memplan.executorch.planning_pass import (
    MemplanPlanningPass,
    memory_planning_pass,
    verify_graph,
)
from memplan.executorch.spec_planner import GraphReport, MemplanAlgorithm
from memplan.executorch.target_regions import RegionOverflowError, algorithm, format_region_report

__all__ = ["GraphReport", "MemplanAlgorithm", "MemplanPlanningPass", "RegionOverflowError",
           "algorithm", "format_region_report", "memory_planning_pass", "verify_graph"]
__getattr__ = renamed(__name__, {"BankOverflowError": "RegionOverflowError",
                                 "format_bank_report": "format_region_report"})
