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
(`memplan.executorch.banks`).

The folder holds all of memplan's ExecuTorch:

- reads (layer 2): `executorch` (``from_executorch``), `executorch_specs` (the
  pass's tensor specs), `executorch_pte` with `pte_flatbuffer`, `pte_verify` and
  `executorch_chain` (a ``.pte`` program, without torch);
- writes (layer 3): `pte_program` (the ``.pte`` program re-planned);
- proves (top layer): `executorch_runtime` (the program run in ExecuTorch's
  runtime with its own plan and with memplan's);
- the pass (top layer): `spec_planner` plans the specs, `spec_check` checks
  them, `planning_pass` is the pass, `banks` its memory banks.

The pass's names below are imported on first use, so that reading a ``.pte``
program imports neither torch nor executorch.
"""

PASS = {  # the pass's public names, by the module that defines them
    "BankOverflowError": "banks", "algorithm": "banks", "format_bank_report": "banks",
    "MemplanPlanningPass": "planning_pass", "memory_planning_pass": "planning_pass",
    "verify_graph": "planning_pass", "GraphReport": "spec_planner",
    "MemplanAlgorithm": "spec_planner",
}

__all__ = sorted(PASS)


def __getattr__(name: str):
    """One of the pass's names (`PASS`), from its module (imports executorch and torch)."""
    if name not in PASS:
        raise AttributeError(f"module 'memplan.executorch' has no attribute {name!r}")
    from memplan.executorch import banks, planning_pass, spec_planner

    modules = {"banks": banks, "planning_pass": planning_pass, "spec_planner": spec_planner}
    return getattr(modules[PASS[name]], name)
