"""Readers: models and files in, `Problem` out. They know nothing of planners.

`load` picks the reader by extension: ``.onnx`` (an ONNX model), ``.tflite``
(a TensorFlow Lite model, as TFLite-Micro plans it), ``.pte`` (an ExecuTorch
program, one arena), ``.py`` (a TVM Relax module as TVMScript, its tensors as
Relax's ``StaticPlanBlockMemory`` plans them), ``.csv`` (MiniMalloc's CSV),
``.json`` (memplan's own problem format).

Top layer: every compiler's reader is below it (layer 2: `memplan.onnx`,
`memplan.tflite`, `memplan.executorch`, `memplan.tvm` hold theirs; the readers
import layers 0-1 only, never a planner).
"""

from __future__ import annotations

import os
from pathlib import Path

from memplan.errors import ProblemError
from memplan.formats import memplan_json, minimalloc_csv
from memplan.problem import Problem

READERS = (".onnx", ".tflite", ".pte", ".py", ".csv", ".json")


def load(path: str | os.PathLike, **options) -> Problem:
    """The problem in ``path``, read by extension; ``options`` go to the reader."""
    suffix = Path(path).suffix.lower()
    if Path(path).is_dir():
        raise ProblemError(f"is a folder; give a model file ({', '.join(READERS)})",
                           file=str(path))
    if suffix == ".csv":
        return minimalloc_csv.read_problem(path, **options)
    if suffix == ".json":
        return memplan_json.read_problem(path, **options)
    if suffix == ".onnx":
        from memplan.onnx.onnx import from_onnx

        return from_onnx(path, **options)
    if suffix == ".tflite":
        from memplan.tflite.tflite import from_tflite

        return from_tflite(path, **options)
    if suffix == ".pte":
        from memplan.executorch.executorch_pte import read_pte

        return read_pte(path, **options)
    if suffix == ".py":
        from memplan.tvm.relax import from_relax

        return from_relax(path, **options)
    raise ProblemError(f"unknown file type {suffix or '(none)'!r}; memplan reads "
                       f"{', '.join(READERS)}", file=str(path))
