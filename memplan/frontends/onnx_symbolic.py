"""Shapes ONNX's inference leaves unknown, from onnxruntime's symbolic shape inference.

ONNX's shape inference, even with data propagation, gives up where a shape
is computed from another tensor's shape through arithmetic it does not fold:
a class token ``Expand``-ed to the batch (CLIP, ViT), Swin's window
partitions, the causal mask decoders build from an attention mask. It names
such a dimension ``unk__N``, and the tensor has no exact size. onnxruntime's
``symbolic_shape_infer`` carries every shape as a sympy expression and folds
them; where a dimension truly depends on data (``NonZero``, a ``Reshape`` to
a shape read from an input) it names a fresh symbol, which the user may bind.

`complete` runs it only when ONNX's inference left a dimension unknown:

- the model given to it has no weights' data: every initializer without its
  values (a weight) becomes a graph input of the same type, so the
  inference reads its shape and never its values; the small integer and
  float constants shape computations read keep their values;
- every main-graph tensor whose ONNX type has an unknown dimension (or no
  type) takes the symbolic type (ONNX's known dimensions stay as they are:
  the symbolic inference only fills what ONNX's left open);
- the user's graph stays the user's: only ``value_info`` changes, never a
  node or a tensor;
- without onnxruntime (the ``prove`` extra), or when its inference fails,
  the model is returned as it was, with a one-line note for the error that
  an unknown size will raise.

Cost: one pass of the symbolic inference over the nodes (sympy), run only
for models that need it.
"""

from __future__ import annotations

import logging

from onnx import GraphProto, ModelProto, TensorProto, TypeProto, ValueInfoProto

from memplan.frontends.onnx_types import ELEMENT_BITS

INSTALL_NOTE = ("; install memplan[prove] (onnxruntime) and memplan infers it with "
                "onnxruntime's symbolic shape inference")


def free_symbols(graph: GraphProto) -> set[str]:
    """The symbolic dimensions of the graph inputs: the user's to bind, never inferred."""
    return {dim.dim_param for value_info in graph.input if value_info.type.HasField("tensor_type")
            for dim in value_info.type.tensor_type.shape.dim if dim.HasField("dim_param")}


def _unknown(type_proto: TypeProto | None, symbols: set[str]) -> bool:
    """No tensor shape, or a dimension that is neither a number nor a graph input's symbol."""
    if type_proto is None or not type_proto.HasField("tensor_type"):
        return type_proto is None or type_proto.WhichOneof("value") is None
    tensor = type_proto.tensor_type
    if not tensor.HasField("shape"):
        return True
    return any(not dim.HasField("dim_value") and dim.dim_param not in symbols
               for dim in tensor.shape.dim)


def unknown_tensors(model: ModelProto) -> list[str]:
    """Main-graph node outputs whose inferred shape is not known in numbers and input symbols."""
    from memplan.frontends.onnx_graph import value_types

    graph = model.graph
    types, symbols = value_types(graph), free_symbols(graph)
    return [name for node in graph.node for name in node.output
            if name and _unknown(types.get(name), symbols)]


def _has_values(tensor: TensorProto) -> bool:
    count = 1
    for dim in tensor.dims:
        count *= dim
    return count == 0 or tensor.data_location != TensorProto.EXTERNAL and bool(
        tensor.raw_data or tensor.float_data or tensor.int32_data or tensor.int64_data
        or tensor.double_data or tensor.uint64_data or tensor.string_data)


def _weights_as_inputs(model: ModelProto) -> ModelProto:
    """A copy of ``model`` whose initializers without values are graph inputs of their type."""
    copy = ModelProto()
    copy.CopyFrom(model)
    kept = [t for t in copy.graph.initializer if _has_values(t)]
    for tensor in copy.graph.initializer:
        if not _has_values(tensor) and tensor.data_type in ELEMENT_BITS:
            value_info = copy.graph.input.add(name=tensor.name)
            value_info.type.tensor_type.elem_type = tensor.data_type
            value_info.type.tensor_type.shape.SetInParent()
            for dim in tensor.dims:
                value_info.type.tensor_type.shape.dim.add().dim_value = dim
    del copy.graph.initializer[:]
    copy.graph.initializer.extend(kept)
    return copy


def _symbolic(model: ModelProto) -> ModelProto:
    """onnxruntime's symbolic shape inference of ``model``, complete or not.

    Its ``infer_shapes`` writes a file into the working directory when the
    inference is incomplete; its steps are run here instead, and what they
    found is kept.
    """
    from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference

    logging.getLogger("onnxruntime.tools.symbolic_shape_infer").setLevel(logging.ERROR)
    inference = SymbolicShapeInference(int_max=2**31 - 1, auto_merge=False,
                                       guess_output_rank=False, verbose=0)
    inference._preprocess(model)
    while inference.run_:
        inference._infer_impl()
    inference._update_output_from_vi()
    return inference.out_mp_


def complete(inferred: ModelProto, bound: ModelProto) -> tuple[ModelProto, str]:
    """``(inferred with its unknown shapes filled, note)``; see the module docstring.

    ``bound`` is the model before ONNX's inference (the user's dims bound).
    The note is empty, or says in one line why the shapes could not be
    filled, for the error an unknown size raises.
    """
    unknown = unknown_tensors(inferred)
    if not unknown:
        return inferred, ""
    try:
        import onnxruntime.tools.symbolic_shape_infer  # noqa: F401
    except ImportError:
        return inferred, INSTALL_NOTE
    try:
        symbolic = _symbolic(_weights_as_inputs(bound))
    except Exception as error:  # its assertions, sympy's errors, ...
        first = next((line.strip() for line in str(error).splitlines() if line.strip()),
                     type(error).__name__)
        return inferred, f"; onnxruntime's symbolic shape inference failed: {first}"
    from memplan.frontends.onnx_graph import value_types

    found = value_types(symbolic.graph)
    declared = {value_info.name: value_info for value_info in inferred.graph.value_info}
    for name in unknown:
        better = found.get(name)
        if better is None or not (better.HasField("tensor_type")
                                  and better.tensor_type.HasField("shape")):
            continue
        value_info = declared.get(name)
        if value_info is None:
            value_info = ValueInfoProto(name=name)
            inferred.graph.value_info.append(value_info)
            value_info = inferred.graph.value_info[-1]
        value_info.type.CopyFrom(_merged(value_info.type, better))
    return inferred, ""


def _merged(onnx_type: TypeProto, symbolic: TypeProto) -> TypeProto:
    """``symbolic``, but with ONNX's numeric dimensions where both give the same rank."""
    merged = TypeProto()
    merged.CopyFrom(symbolic)
    if not (onnx_type.HasField("tensor_type") and onnx_type.tensor_type.HasField("shape")):
        return merged
    ours = onnx_type.tensor_type.shape.dim
    theirs = merged.tensor_type.shape.dim
    if len(ours) == len(theirs):
        for mine, other in zip(ours, theirs, strict=True):
            if mine.HasField("dim_value"):
                other.dim_value = mine.dim_value
    if not merged.tensor_type.elem_type:
        merged.tensor_type.elem_type = onnx_type.tensor_type.elem_type
    return merged


__all__ = ["INSTALL_NOTE", "complete", "free_symbols", "unknown_tensors"]
