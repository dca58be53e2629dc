"""A plan written into its ``.tflite`` model, as TFLite-Micro's offline plan.

Why: TFLite-Micro (TFLM) reads an offline plan only from the model it runs,
from the ``metadata`` entry named ``OfflineMemoryAllocation`` (`tflm` makes
the entry's bytes). ``memplan solve model.tflite -o planned.tflite`` should
give a model that a firmware build takes as it is.

Steps (`planned_model`):

- read the model with the schema's object API (`memplan.tflite.tflite`);
  refuse models whose constant data lies outside the flatbuffer (files over
  2 GiB keep it after the flatbuffer, where a rewrite would lose it);
- the plan's bytes for the model's tensors in tensor order: every tensor of
  the problem at its planned offset, -1 for the rest (weights, and anything
  TFLM allocates itself);
- an existing ``OfflineMemoryAllocation`` entry is replaced: its buffer is
  rewritten when nothing else uses it, and extra entries of that name are
  dropped; otherwise a new buffer and a new metadata entry are appended;
- pack the tree again, with the ``TFL3`` identifier and every buffer's data
  16-byte aligned (as the converter does): every table, vector and buffer
  keeps its content and its index, only the layout of the bytes changes.

Cost: O(model size) to unpack and pack. `read_planned_offsets` reads the
entry back (None when the model has none).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from memplan.errors import ProblemError
from memplan.output_files import open_replacing
from memplan.plan import Plan
from memplan.problem import Problem
from memplan.tflite import tflite
from memplan.tflite.tflm import METADATA_NAME, offline_plan_bytes, read_offline_plan


def _aligned_buffer_class(fb):
    class AlignedBuffer(fb.BufferT):
        """A ``BufferT`` whose data vector starts on a 16-byte boundary."""

        def Pack(self, builder):  # noqa: N802 (the schema's method name)
            data = None
            if self.data is not None:
                payload = np.asarray(self.data, np.uint8).tobytes()
                builder.StartVector(1, len(payload), tflite.ALIGNMENT)
                builder.head -= len(payload)
                builder.Bytes[builder.head:builder.head + len(payload)] = payload
                builder.vectorNumElems = len(payload)
                data = builder.EndVector()
            fb.BufferStart(builder)
            if data is not None:
                fb.BufferAddData(builder, data)
            fb.BufferAddOffset(builder, self.offset)
            fb.BufferAddSize(builder, self.size)
            return fb.BufferEnd(builder)

    return AlignedBuffer


def _name(entry: Any) -> str:
    name = entry.name
    return name.decode("utf-8", "replace") if isinstance(name, bytes) else (name or "")


def _used_buffers(tree: Any, skip: set[int]) -> set[int]:
    """Buffer indices that tensors or metadata entries (other than ``skip``) refer to."""
    used = {int(t.buffer) for sg in tree.subgraphs or [] for t in sg.tensors or []}
    used |= {int(m.buffer) for i, m in enumerate(tree.metadata or []) if i not in skip}
    used |= {int(b) for b in tflite.indices(tree.metadataBuffer)}
    return used


def planned_model(model: str | os.PathLike | bytes | bytearray, problem: Problem,
                  plan: Plan) -> bytes:
    """The model's bytes with ``plan`` as its ``OfflineMemoryAllocation`` metadata."""
    data, file = tflite.model_bytes(model)
    tree = tflite.read_model(data, file=file)
    tflite.check_supported(tree, file=file)
    if any(buffer.offset > 1 for buffer in tree.buffers or []):
        raise ProblemError("the model keeps constant data outside the flatbuffer (a model "
                           "over 2 GiB); memplan does not rewrite those", file=file)
    payload = np.frombuffer(offline_plan_bytes(problem, plan, tensors=tflite.tensor_ids(tree)),
                            np.uint8)
    fb = tflite.schema()
    metadata = list(tree.metadata or [])
    ours = [i for i, entry in enumerate(metadata) if _name(entry) == METADATA_NAME]
    buffers = list(tree.buffers or [])
    target = int(metadata[ours[0]].buffer) if ours else -1
    if not 0 <= target < len(buffers) or target in _used_buffers(tree, set(ours)):
        buffers.append(fb.BufferT())
        target = len(buffers) - 1
    buffers[target] = fb.BufferT(data=payload)
    if ours:
        metadata = [m for i, m in enumerate(metadata) if i not in ours[1:]]
        metadata[ours[0]].buffer = target
    else:
        entry = fb.MetadataT()
        entry.name, entry.buffer = METADATA_NAME, target
        metadata.append(entry)
    aligned = _aligned_buffer_class(fb)
    tree.buffers = [aligned(data=b.data, offset=b.offset, size=b.size) for b in buffers]
    tree.metadata = metadata
    import flatbuffers

    builder = flatbuffers.Builder(len(data) + len(payload) + 1024)
    builder.Finish(tree.Pack(builder), file_identifier=tflite.FILE_IDENTIFIER)
    return bytes(builder.Output())


def write_planned_model(path: str | os.PathLike, model: str | os.PathLike | bytes | bytearray,
                        problem: Problem, plan: Plan) -> None:
    """Write `planned_model` to ``path``."""
    planned = planned_model(model, problem, plan)
    with open_replacing(path, "wb") as handle:
        handle.write(planned)


def read_planned_offsets(model: str | os.PathLike | bytes | bytearray) -> np.ndarray | None:
    """The offline plan's offsets stored in a model (-1: TFLM allocates), or None."""
    data, file = tflite.model_bytes(model)
    tree = tflite.read_model(data, file=file)
    for entry in tree.metadata or []:
        if _name(entry) == METADATA_NAME:
            buffer = tree.buffers[int(entry.buffer)]
            raw = b"" if buffer.data is None else np.asarray(buffer.data, np.uint8).tobytes()
            return read_offline_plan(raw)[2]
    return None
