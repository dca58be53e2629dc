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
within its size (`memplan.executorch.target_regions`).

The folder holds all of memplan's ExecuTorch:

- reads (layer 2): `executorch` (``from_executorch``), `executorch_specs` (the
  pass's tensor specs), `executorch_pte` with `pte_flatbuffer`, `pte_verify` and
  `executorch_chain` (a ``.pte`` program, without torch);
- writes (layer 3): `pte_program` (the ``.pte`` program re-planned);
- proves (top layer): `executorch_runtime` (the program run in ExecuTorch's
  runtime with its own plan and with memplan's);
- the pass (top layer): `spec_planner` plans the specs, `spec_check` checks
  them, `planning_pass` is the pass, `target_regions` its memory regions.

The pass's names below are imported on first use, so that reading a ``.pte``
program imports neither torch nor executorch.
"""

from memplan.errors import renamed

PASS = {  # the pass's public names, by the module that defines them
    "RegionOverflowError": "target_regions", "algorithm": "target_regions",
    "format_region_report": "target_regions",
    "MemplanPlanningPass": "planning_pass", "memory_planning_pass": "planning_pass",
    "verify_graph": "planning_pass", "GraphReport": "spec_planner",
    "MemplanAlgorithm": "spec_planner",
}

__all__ = sorted(PASS)

_old_name = renamed(__name__, {  # kept for one release
    "BankOverflowError": "RegionOverflowError", "format_bank_report": "format_region_report"})


def __getattr__(name: str):
    """One of the pass's names (`PASS`), from its module (imports executorch and torch)."""
    if name not in PASS:
        return _old_name(name)
    import importlib

    return getattr(importlib.import_module(f"{__name__}.{PASS[name]}"), name)
