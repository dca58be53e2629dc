"""Re-batch an ONNX model whose batch size is fixed in the file.

Most exported models say ``[1, 3, 224, 224]`` for their input, not
``["N", 3, 224, 224]``: binding a symbolic dimension (``dims``) cannot change
their batch size. A sweep over batch sizes needs the model as if it had been
exported with another one. `rebatch` rewrites a copy before shape inference:

- the leading dimension of every graph input (initializers excluded) becomes
  ``batch``, whether it was a number or a symbol. An input without a leading
  batch dimension is refused, naming it: a scalar, or a vector of fixed
  length (``float[7]``: its only dimension is data, not a batch). A batch
  given as a symbol is better bound by name (``dims``, ``--dim N=8``);
- a graph output whose leading dimension was the old batch size gets the new
  one (its declared shape would otherwise contradict the inferred one);
- inferred ``value_info`` entries are dropped: shape inference rebuilds them;
- a ``Reshape`` whose target shape is a constant (an initializer or a
  ``Constant`` node) starting with the old batch size gets a copy of that
  constant starting with 0 instead, which ONNX reads as "the input's own
  leading dimension" (``allowzero=0``). This is what ``x.view(1, -1)`` in the
  exporter meant; a Reshape that sets ``allowzero=1`` is left alone.

What it cannot see: a constant that encodes the batch size elsewhere (an
``Expand`` to ``[1, ...]``, a ``Slice`` end) or a Reshape whose input's
leading dimension is not the batch. Shape inference (strict by default in
`memplan.onnx.onnx`) refuses most of those as inconsistent, so a sweep
row says so instead of planning wrong sizes. Cost: one copy of the model as given
(sweeps give it without its weights, `onnx_graph.load_graph`)
and O(nodes + initializers).
"""

from __future__ import annotations

import numpy as np
from onnx import ModelProto, TensorProto, numpy_helper

from memplan.errors import ProblemError

SUFFIX = "__memplan_batch"  # names of the rewritten Reshape targets


def _old_batch(model: ModelProto, initializers: set[str]) -> int | None:
    """The leading dimension the inputs share when it is a number (the exported batch)."""
    leading = {dims[0].dim_value for value in model.graph.input if value.name not in initializers
               for dims in [value.type.tensor_type.shape.dim]
               if len(dims) and dims[0].HasField("dim_value")}
    return leading.pop() if len(leading) == 1 else None


def _shape_constants(model: ModelProto) -> dict[str, TensorProto]:
    """Constant tensors by name: the initializers and the ``value`` of Constant nodes."""
    constants = {tensor.name: tensor for tensor in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type == "Constant" and node.output:
            for attribute in node.attribute:
                if attribute.name == "value":
                    constants[node.output[0]] = attribute.t
    return constants


def _allows_zero(node) -> bool:
    return any(a.name == "allowzero" and a.i for a in node.attribute)


def rebatch(model: ModelProto, batch: int, *, source: str | None = None) -> ModelProto:
    """A copy of ``model`` planned at batch size ``batch`` (see the module docstring)."""
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ProblemError(f"batch must be a whole number >= 1, got {batch!r}", file=source)
    result = ModelProto()
    result.CopyFrom(model)
    graph = result.graph
    initializers = {tensor.name for tensor in graph.initializer}
    old = _old_batch(result, initializers)
    fed = [value for value in graph.input if value.name not in initializers]
    if not fed:
        raise ProblemError("cannot re-batch: the graph has no input", file=source)
    for value in fed:
        dims = value.type.tensor_type.shape.dim
        if len(dims) == 0 or (len(dims) == 1 and not dims[0].HasField("dim_param")):
            shape = [d.dim_param or d.dim_value for d in dims]
            raise ProblemError(f"cannot re-batch: input {value.name!r} of shape {shape} has no "
                               "leading batch dimension (a scalar or a vector of fixed length); "
                               "bind a symbolic batch with --dim NAME=...", file=source)
    for value in fed:
        value.type.tensor_type.shape.dim[0].dim_value = batch  # clears a dim_param (a oneof)
    for value in graph.output:
        dims = value.type.tensor_type.shape.dim
        if old is not None and len(dims) and dims[0].HasField("dim_value") \
                and dims[0].dim_value == old:
            dims[0].dim_value = batch
    del graph.value_info[:]
    if old is None or old == batch:
        return result
    constants = _shape_constants(result)
    rewritten: dict[str, str] = {}
    for node in graph.node:
        if node.op_type != "Reshape" or len(node.input) < 2 or _allows_zero(node):
            continue
        target = node.input[1]
        if target not in constants:
            continue
        if target not in rewritten:
            shape = numpy_helper.to_array(constants[target])
            if shape.ndim != 1 or len(shape) == 0 or int(shape[0]) != old:
                continue
            shape = np.array(shape, copy=True)
            shape[0] = 0
            rewritten[target] = target + SUFFIX
            graph.initializer.append(numpy_helper.from_array(shape, rewritten[target]))
        node.input[1] = rewritten[target]
    return result


__all__ = ["rebatch"]
