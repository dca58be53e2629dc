"""memplan inside Apache TVM: Relax's memory planning, with a proof of how close to optimal.

Needs the ``tvm`` extra (``apache-tvm``)::

    import memplan.tvm
    from tvm import relax

    pipeline = memplan.tvm.pipeline(time_limit=10)
    executable = relax.build(mod, "llvm", relax_pipeline=pipeline)
    for report in pipeline.reports:
        print(report.line())

`memplan.tvm.memory_planning_pass` is the pass alone (to run right after
``StaticPlanBlockMemory`` in a pipeline of one's own). The folder holds all of
memplan's TVM:

- reads (layer 2): `relax` (``from_relax``), `relax_walk` (a function's
  bindings), `relax_script` (TVMScript parsed without running its code);
- the pass (top layer): `relax_pass`, `rewrite` (the plan written back into
  the function), `pipeline` (the pass in Relax's default pipeline);
- proves (top layer): `relax_vm` (Relax's build and memplan's, run in TVM's VM).

Importing any of them imports ``tvm`` (reading a Relax module needs it too).
"""

from memplan.errors import require

require("tvm", "tvm", "memplan.tvm")

# isort: split
from memplan.tvm.pipeline import MemplanPipeline, pipeline  # noqa: E402
from memplan.tvm.relax_pass import (  # noqa: E402
    STORAGE_CAPS,
    FunctionReport,
    MemplanPlanMemory,
    memory_planning_pass,
)

__all__ = ["STORAGE_CAPS", "FunctionReport", "MemplanPipeline", "MemplanPlanMemory",
           "memory_planning_pass", "pipeline"]
