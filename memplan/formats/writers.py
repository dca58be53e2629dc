"""Writers: a plan out to where it is used (firmware, TFLite-Micro, files, the ONNX model).

`export` picks the writer by format name:

- ``c``: a C header, one offset and size macro per buffer (`c_header`);
- ``tflm``: TFLite-Micro's ``OfflineMemoryAllocation`` metadata bytes (`tflm`);
- ``json``: memplan JSON, the problem and the plan in one document
  (``{"problem": ..., "plan": ...}``; `memplan.formats.memplan_json` reads both);
- ``csv``: a MiniMalloc CSV solution (granted sizes for variable-size scratch);
- ``onnx``: the ONNX model with the plan in its metadata_props (`onnx_metadata`);
- ``tflite``: the ``.tflite`` model with the plan as TFLite-Micro's offline plan
  (``OfflineMemoryAllocation`` metadata; `tflite_model`);
- ``pte``: the ExecuTorch ``.pte`` program re-planned (`pte_program`).

Top layer: every compiler's writer is below it (`memplan.onnx`, `memplan.tflite`,
`memplan.executorch` hold theirs).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from memplan.formats import memplan_json, minimalloc_csv
from memplan.formats.c_header import c_header, write_c_header
from memplan.onnx.onnx_metadata import annotate, write_annotated
from memplan.plan import Plan
from memplan.problem import Buffer, Problem
from memplan.tflite.tflm import offline_plan, read_offline_plan, write_offline_plan


def _write_json(path, problem: Problem, plan: Plan, model=None) -> None:
    memplan_json.write_document(path, {"problem": memplan_json.problem_to_dict(problem),
                                       "plan": memplan_json.plan_to_dict(problem, plan)})


def _write_csv(path, problem: Problem, plan: Plan, model=None) -> None:
    if plan.sizes is not None:  # the granted sizes are the ones the runtime uses
        problem = problem.replace(buffers=[
            Buffer(b.id, int(size), b.start, b.end, b.alignment, b.offset, b.regions, b.kind)
            for b, size in zip(problem.buffers, plan.sizes.tolist(), strict=True)])
    minimalloc_csv.write_csv(path, problem, plan)


def _write_onnx(path, problem: Problem, plan: Plan, model=None, node_order=None) -> None:
    if model is None:
        raise ValueError("the onnx export annotates a model: pass model= (a path or ModelProto)")
    write_annotated(path, model, problem, plan, node_order=node_order)


def _write_tflm(path, problem: Problem, plan: Plan, model=None, **options) -> None:
    if isinstance(model, str | os.PathLike | bytes | bytearray):  # a .tflite model
        from memplan.tflite.tflite import tensor_ids

        model = tensor_ids(model)
    write_offline_plan(path, problem, plan, tensors=model, **options)


def _write_tflite(path, problem: Problem, plan: Plan, model=None) -> None:
    if model is None:
        raise ValueError("the tflite export writes the plan into a model: pass model= "
                         "(a .tflite path or its bytes)")
    from memplan.tflite.tflite_model import write_planned_model

    write_planned_model(path, model, problem, plan)


def _write_pte(path, problem: Problem, plan: Plan, model=None, method=None) -> None:
    if model is None:
        raise ValueError("the pte export re-plans a program: pass model= (a .pte path or "
                         "its bytes)")
    from memplan.executorch.pte_program import write_planned_program

    write_planned_program(path, model, problem, plan, method=method)


def _write_c(path, problem: Problem, plan: Plan, model=None, **options) -> None:
    if model is not None:  # the ONNX model: which inputs it also returns
        from memplan.onnx.onnx_graph import load_graph

        options.setdefault("outputs", [v.name for v in load_graph(model)[0].graph.output])
    write_c_header(path, problem, plan, **options)


WRITERS: dict[str, Callable[..., None]] = {
    "c": _write_c, "tflm": _write_tflm, "json": _write_json, "csv": _write_csv,
    "onnx": _write_onnx, "tflite": _write_tflite, "pte": _write_pte,
}
FORMATS: tuple[str, ...] = tuple(WRITERS)


def export(problem: Problem, plan: Plan, fmt: str, path: str | os.PathLike, model: Any = None,
           **options) -> None:
    """Write ``plan`` for ``problem`` to ``path`` in format ``fmt`` (one of `FORMATS`).

    ``model`` is the ONNX model to annotate for ``onnx`` (a path or
    ``onnx.ModelProto``), the ``.tflite`` model (a path or its bytes) for
    ``tflite``, the ``.pte`` program (a path or its bytes) for ``pte``, for
    ``c`` optionally the ONNX model whose outputs to mark, and
    for ``tflm`` optionally the model's tensor names in tensor-index order, or
    the ``.tflite`` model they are read from. ``options`` go to the writer:
    ``prefix`` for ``c``, ``subgraph`` for ``tflm``.
    """
    try:
        writer = WRITERS[fmt]
    except KeyError:
        raise ValueError(f"unknown export format {fmt!r}; valid formats: "
                         f"{', '.join(FORMATS)}") from None
    writer(path, problem, plan, model, **options)


__all__ = ["FORMATS", "annotate", "c_header", "export", "offline_plan", "read_offline_plan"]
