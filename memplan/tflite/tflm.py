"""A plan as TensorFlow Lite Micro's offline memory plan (``OfflineMemoryAllocation``).

TFLite-Micro reads an offline plan from the model's ``metadata`` entry named
``OfflineMemoryAllocation``: a flatbuffer buffer of little-endian 32-bit
integers (``micro_allocation_info.cc``, ``GetOfflinePlannedOffsets``)::

    | index   | value                                                   |
    | 0       | format version, 0                                       |
    | 1       | subgraph index the plan applies to                      |
    | 2       | n, the number of offsets that follow                    |
    | 3 + i   | arena offset of tensor #i, or -1: allocate at runtime   |

``n`` must equal the number of tensors of the model (weights included, as
-1), in the model's tensor order. The runtime treats the offsets as fixed and
fits whatever it still allocates itself (scratch buffers requested with
``RequestScratchBufferInArena``, tensors marked -1) around them.

Steps:
- ``tensors`` gives the model's tensor names in tensor-index order (default:
  the problem's buffers in their order, as when the problem was built from
  that model); a tensor that is no buffer of the problem gets -1;
- every buffer of the problem must be one of the tensors, except scratch
  buffers (TFLite-Micro requests those at runtime);
- the plan must use one arena (one region) and fit int32 offsets.

This module makes the bytes; putting them into a ``.tflite`` flatbuffer's
metadata is the model converter's job. Cost O(n).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from memplan.errors import ProblemError
from memplan.output_files import open_replacing
from memplan.plan import Plan
from memplan.problem import Problem

METADATA_NAME = "OfflineMemoryAllocation"
VERSION = 0
RUNTIME = -1  # the offset of a tensor that TFLite-Micro allocates itself
_INT32 = np.dtype("<i4")


def offline_plan(problem: Problem, plan: Plan, *, tensors: Sequence[str] | None = None,
                 subgraph: int = 0) -> np.ndarray:
    """The metadata as an int32 array ``[version, subgraph, n, offset_0 .. offset_n-1]``."""
    if plan.regions is not None and len(np.unique(plan.regions)) > 1:
        raise ProblemError("TFLite-Micro has one arena; this plan uses several regions")
    if tensors is None:
        tensors = problem.ids
    position = {name: i for i, name in enumerate(tensors)}
    if len(position) != len(tensors):
        raise ProblemError("the tensor list names a tensor twice")
    missing = [id for id, kind in zip(problem.ids, problem.kinds, strict=True)
               if id not in position and kind != "scratch"]
    if missing:
        raise ProblemError(f"{len(missing)} buffers are not tensors of the model, e.g. "
                           f"{', '.join(map(repr, missing[:5]))}")
    offsets = np.full(len(tensors), RUNTIME, np.int64)
    for idx, id in enumerate(problem.ids):
        if id in position:
            offsets[position[id]] = plan.offsets[idx]
    if len(offsets) and int(offsets.max()) > np.iinfo(np.int32).max:
        raise ProblemError(f"offset {int(offsets.max())} does not fit TFLite-Micro's int32")
    header = np.array([VERSION, subgraph, len(tensors)], np.int64)
    return np.concatenate([header, offsets]).astype(_INT32)


def offline_plan_bytes(problem: Problem, plan: Plan, *, tensors: Sequence[str] | None = None,
                       subgraph: int = 0) -> bytes:
    """The metadata buffer's bytes, little-endian, as TFLite-Micro reads them."""
    return offline_plan(problem, plan, tensors=tensors, subgraph=subgraph).tobytes()


def read_offline_plan(data: bytes) -> tuple[int, int, np.ndarray]:
    """Decode the metadata buffer: ``(version, subgraph, offsets)``, -1 for runtime tensors."""
    if len(data) % 4 or len(data) < 12:
        raise ProblemError(f"an offline plan is at least 3 int32 values, got {len(data)} bytes")
    values = np.frombuffer(data, _INT32)
    version, subgraph, count = (int(v) for v in values[:3])
    if count != len(values) - 3:
        raise ProblemError(f"the offline plan announces {count} offsets but holds "
                           f"{len(values) - 3}")
    return version, subgraph, values[3:].astype(np.int64)


def write_offline_plan(path: str | os.PathLike, problem: Problem, plan: Plan, *,
                       tensors: Sequence[str] | None = None, subgraph: int = 0) -> None:
    """Write the metadata buffer's bytes to ``path`` (a ``.bin`` for the converter)."""
    with open_replacing(path, "wb") as handle:
        handle.write(offline_plan_bytes(problem, plan, tensors=tensors, subgraph=subgraph))
