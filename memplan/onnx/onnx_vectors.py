"""What ONNX's shape inference sees of a weightless model: no long integer vector.

ONNX's data propagation (`onnx_graph.infer` runs it) parses the values of
every INT32/INT64 vector initializer or ``Constant`` that a shape-computing
operator reads, a Gather's lookup table too, and fails on one whose values
the weightless reader left out (`onnx_weightless.keeps_values`: more than
`SHAPE_VALUES` elements); and it makes about 70 bytes per element of a graph
input that is an integer vector of known length (1.4 GB for a 20M-element
input of a 200-byte model). So, around shape inference:

- `for_shape_inference`: each integer vector of unread values becomes a graph
  input of its type and dims (its ``Constant`` node left out), and every
  integer vector input longer than `SHAPE_VALUES` gets a symbolic length;
- `as_given`: the inferred model gets the model's own inputs, initializers and
  nodes back, the types of those ``Constant`` outputs, and the real lengths in
  place of the symbols.

A shape inferred for any length holds for the real one; a shape computed from
the values is unknown, refused by name, never guessed. Subgraphs are left as
they are. Cost: O(graph) when there is such a vector, else nothing.
"""

from __future__ import annotations

from onnx import ModelProto, NodeProto, TensorProto

from memplan.onnx.onnx_weightless import SHAPE_TYPES, SHAPE_VALUES, keeps_values


def _unread_vector(tensor: TensorProto) -> bool:
    return tensor.data_type in SHAPE_TYPES and len(tensor.dims) <= 1 and not keeps_values(tensor)


def _graphs(graph):
    """``graph`` and its subgraphs, at any depth."""
    pending = [graph]
    while pending:
        graph = pending.pop()
        yield graph
        for node in graph.node:
            for attribute in node.attribute:
                pending.extend([attribute.g] if attribute.HasField("g") else [])
                pending.extend(attribute.graphs)


def _symbol_prefix(model: ModelProto) -> str:
    """The start of the length symbols: one no dim_param of ``model`` starts with, so that
    only the symbols made here get a length back."""
    prefix = "memplan:length of "
    used = [dim.dim_param for graph in _graphs(model.graph)
            for value in (*graph.input, *graph.value_info, *graph.output)
            for dim in value.type.tensor_type.shape.dim if dim.dim_param]
    while any(symbol.startswith(prefix) for symbol in used):
        prefix = "'" + prefix
    return prefix


def _unread_constant(node: NodeProto) -> TensorProto | None:
    """The value of a ``Constant`` node that is an integer vector of unread values."""
    if node.op_type == "Constant" and node.domain in ("", "ai.onnx") and len(node.output) == 1:
        for attribute in node.attribute:
            if attribute.name == "value" and _unread_vector(attribute.t):
                return attribute.t
    return None


def _vectors(model: ModelProto) -> dict[str, TensorProto]:
    """Tensor name -> value, of the integer vectors of unread values (initializers and
    ``Constant`` nodes of the main graph)."""
    found = {t.name: t for t in model.graph.initializer if _unread_vector(t)}
    for node in model.graph.node:
        value = _unread_constant(node)
        if value is not None:
            found[node.output[0]] = value
    return found


def _value_info(name: str, tensor: TensorProto, value) -> None:
    """Make ``value`` (a ValueInfoProto) say ``name`` is of ``tensor``'s type and dims."""
    value.name = name
    value.type.tensor_type.elem_type = tensor.data_type
    value.type.tensor_type.shape.SetInParent()
    for dim in tensor.dims:
        value.type.tensor_type.shape.dim.add().dim_value = dim


def for_shape_inference(model: ModelProto) -> ModelProto:
    """``model`` as ONNX's shape inference should see it: no long integer vector.

    ONNX's data propagation parses every INT32/INT64 vector initializer or
    ``Constant`` that a shape-computing operator reads (a Gather's lookup table
    too) and fails on one without its data; and it makes about 70 bytes per
    element of a graph input's vector of known length. So an integer vector of
    unread values becomes a graph input, and every long integer vector input
    (more than `SHAPE_VALUES` elements) gets a symbolic length, which
    `as_given` puts back: a shape inferred for any length holds for the real
    one, and a shape computed from the values is unknown, refused by name,
    never wrong. A copy when anything changes, else ``model``.
    """
    vectors = _vectors(model)
    if not vectors and not any(_long_vector(v.type) for v in model.graph.input):
        return model
    shown = ModelProto()
    shown.CopyFrom(model)
    graph = shown.graph
    inputs = {value.name for value in graph.input}
    for name, tensor in vectors.items():
        if name not in inputs:
            _value_info(name, tensor, graph.input.add())
    kept = [t for t in graph.initializer if t.name not in vectors]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    nodes = [node for node in graph.node if _unread_constant(node) is None]
    del graph.node[:]
    graph.node.extend(nodes)
    prefix = _symbol_prefix(model)
    for value in graph.input:
        if _long_vector(value.type):
            value.type.tensor_type.shape.dim[0].dim_param = prefix + value.name
    return shown


def _long_vector(value_type) -> bool:
    tensor = value_type.tensor_type
    return (value_type.HasField("tensor_type") and tensor.elem_type in SHAPE_TYPES
            and len(tensor.shape.dim) == 1 and tensor.shape.dim[0].dim_value > SHAPE_VALUES)


def as_given(inferred: ModelProto, model: ModelProto) -> ModelProto:
    """``inferred`` (of `for_shape_inference`'s model) with ``model``'s inputs,
    initializers, nodes and vector lengths."""
    vectors = _vectors(model)
    if not vectors and not any(_long_vector(v.type) for v in model.graph.input):
        return inferred
    prefix = _symbol_prefix(model)
    lengths = {prefix + name: t.dims[0] for name, t in vectors.items() if t.dims}
    lengths.update((prefix + v.name, v.type.tensor_type.shape.dim[0].dim_value)
                   for v in model.graph.input if _long_vector(v.type))
    graph = inferred.graph
    for field in ("input", "initializer", "node"):
        del getattr(graph, field)[:]
        getattr(graph, field).extend(getattr(model.graph, field))
    for node in model.graph.node:
        value = _unread_constant(node)
        if value is not None:
            _value_info(node.output[0], value, graph.value_info.add())
    for body in _graphs(graph):
        for value in (*body.value_info, *body.output):
            for dim in value.type.tensor_type.shape.dim:
                if dim.dim_param in lengths:
                    dim.dim_value = lengths[dim.dim_param]
    return inferred


__all__ = ["as_given", "for_shape_inference"]
