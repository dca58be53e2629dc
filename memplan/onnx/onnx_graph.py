"""An ONNX graph as a schedule: which nodes run, in which step, reading and writing what.

Untrusted files come in, so loading is defensive:

- `load_graph` reads the model without its weights' data (`onnx_weightless`:
  only tensors of at most 1 KiB and integer vectors of at most 1024 elements
  keep their values, read alone from the file or from external data in the
  model's folder); `load_model` parses it whole, for running it. Neither
  opens any other path named inside the model, nor any file that is not a
  regular one; a truncated or corrupted file, or one that is not an ONNX
  model, raises `ProblemError` naming the file;
- `bind_dims` writes the user's values for symbolic dimensions into the
  graph inputs, so that shape inference propagates concrete shapes;
- `infer` runs ONNX shape inference (strict by default: an inconsistent model
  is refused rather than planned with a wrong size), long integer vectors
  out of its data propagation's way (`onnx_vectors`).

`analyze` walks the nodes once, in their order (the schedule):

- every tensor a node reads (its inputs, and the outer-scope tensors its
  If/Loop/Scan subgraphs capture) must exist already, else `ProblemError`
  naming the node and the tensor (not topological, or never produced);
- a node is *constant* when it is ``Constant``, or a deterministic standard
  operator all of whose reads are constant (initializers, ``Constant``,
  ``ConstantOfShape`` of an initializer, an ``Unsqueeze`` of such, ...).
  Constant nodes are folded ahead of time: they take no step and their
  outputs are weights, not activations;
- every other node is one step: ``steps[i]`` runs at step ``i``.

O(nodes + edges + subgraph nodes).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import onnx
from onnx import AttributeProto, GraphProto, ModelProto, NodeProto, TypeProto

from memplan.errors import ProblemError
from memplan.onnx.onnx_vectors import as_given, for_shape_inference
from memplan.onnx.onnx_weightless import load_weightless, open_regular

STANDARD_DOMAINS = ("", "ai.onnx")
# Deterministic-looking in shape, but random in value: never folded as constants.
NONDETERMINISTIC = frozenset({"RandomNormal", "RandomUniform", "RandomNormalLike",
                              "RandomUniformLike", "Multinomial", "Bernoulli"})


def describe(node: NodeProto, position: int) -> str:
    """``node 'conv1' (Conv)``, or ``node #3 (Conv)`` for an unnamed node."""
    name = repr(node.name) if node.name else f"#{position}"
    return f"node {name} ({node.op_type})"


def load_model(model: str | os.PathLike | bytes | ModelProto) -> tuple[ModelProto, str | None]:
    """``(model, source)``: parse a file or bytes whole (never external data), or take a ModelProto.

    For running the model (`memplan.onnx.onnx_arena`); planning reads `load_graph`'s
    weightless model. The source is the file name for errors, None for an
    in-memory model.
    """
    if isinstance(model, ModelProto):
        return model, None
    source = None
    if isinstance(model, bytes):
        data = model
    else:
        source = str(model)
        try:
            with open_regular(source, "the model", source) as handle:
                data = handle.read()
        except OSError as error:
            raise ProblemError(f"cannot read the model: {error.strerror or error}",
                               file=source) from None
    try:
        proto = onnx.load_model_from_string(data)  # bytes only: no external data is opened
    except Exception as error:  # protobuf's DecodeError and friends
        raise ProblemError(f"not a readable ONNX model (truncated or corrupted?): {error}",
                           file=source) from None
    return _complete(proto, source), source


def load_graph(model: str | os.PathLike | bytes | ModelProto) -> tuple[ModelProto, str | None]:
    """``(model without its weights' data, source)``: what planning reads (`onnx_weightless`).

    Tensors keep their names, element types and dims; only the few integer
    constants that shape inference reads keep their values. Memory does not
    grow with the weights. A ModelProto given is copied, never changed.
    """
    proto, source = load_weightless(model)
    return _complete(proto, source), source


def _complete(proto: ModelProto, source: str | None) -> ModelProto:
    """``proto``, refused when it lacks what every ONNX model has."""
    missing = [what for what, present in (("graph", proto.HasField("graph")),
                                          ("ir_version", proto.ir_version > 0),
                                          ("opset_import", len(proto.opset_import) > 0),
                                          ("graph outputs", len(proto.graph.output) > 0))
               if not present]
    if missing:
        raise ProblemError(f"not a complete ONNX model (truncated or corrupted?): no "
                           f"{', no '.join(missing)}", file=source)
    return proto


def bind_dims(model: ModelProto, dims: Mapping[str, int], source: str | None, *,
              copy: bool = True) -> ModelProto:
    """A copy of ``model`` whose graph inputs have ``dims`` written over their symbols.

    ``copy=False`` binds them in ``model`` itself (one the caller parsed: no
    second copy of its weights).
    """
    for symbol, value in dims.items():
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**63:
            raise ProblemError(f"dims[{symbol!r}] must be an integer in [0, 2^63), got "
                               f"{value!r}", file=source)
    bound = model
    if copy:
        bound = ModelProto()
        bound.CopyFrom(model)
    for value_info in bound.graph.input:
        if value_info.type.HasField("tensor_type"):
            for dim in value_info.type.tensor_type.shape.dim:
                if dim.HasField("dim_param") and dim.dim_param in dims:
                    dim.dim_value = dims[dim.dim_param]  # clears dim_param (a oneof)
    return bound


def infer(model: ModelProto, *, strict: bool, source: str | None) -> ModelProto:
    """``model`` with inferred types and shapes (data propagation on)."""
    _refuse_negative_dims(model.graph, source)
    try:
        inferred = onnx.shape_inference.infer_shapes(
            for_shape_inference(model), check_type=True, strict_mode=strict, data_prop=True)
        return as_given(inferred, model)
    except Exception as error:  # InferenceError, ValidationError, or worse from C++
        hint = "; from_onnx(..., strict=False) plans it anyway where sizes are known" \
            if strict else ""
        raise ProblemError(f"shape inference failed: {error}".strip() + hint,
                           file=source) from None


def _type_dims(proto: TypeProto) -> Iterable[int]:
    """The fixed dimensions of a type, through sequences, optionals and maps."""
    kind = proto.WhichOneof("value")
    if kind in ("tensor_type", "sparse_tensor_type"):
        yield from (d.dim_value for d in getattr(proto, kind).shape.dim
                    if d.HasField("dim_value"))
    elif kind in ("sequence_type", "optional_type"):
        yield from _type_dims(getattr(proto, kind).elem_type)
    elif kind == "map_type":
        yield from _type_dims(proto.map_type.value_type)


def _refuse_negative_dims(graph: GraphProto, source: str | None) -> None:
    """A negative dimension, declared or on a tensor, named before ONNX's shape inference
    sees it: its C++ aborts the process on some (Slice clamps to a negative bound)."""
    for value_info in (*graph.input, *graph.value_info, *graph.output):
        if any(d < 0 for d in _type_dims(value_info.type)):
            raise ProblemError(f"tensor {value_info.name!r}: a declared dimension is negative "
                               f"({list(_type_dims(value_info.type))})", file=source)
    tensors = [*graph.initializer, *(s.values for s in graph.sparse_initializer)]
    tensors += [a.t for node in graph.node for a in node.attribute
                if a.type == AttributeProto.TENSOR]
    for tensor in tensors:
        if any(d < 0 for d in tensor.dims):
            raise ProblemError(f"tensor {tensor.name!r}: dims {list(tensor.dims)} has a "
                               "negative entry", file=source)
    for node in graph.node:
        for body in subgraphs(node):
            _refuse_negative_dims(body, source)


def subgraphs(node: NodeProto) -> Iterable[GraphProto]:
    """The bodies of If, Loop, Scan (any GRAPH or GRAPHS attribute)."""
    for attribute in node.attribute:
        if attribute.type == AttributeProto.GRAPH:
            yield attribute.g
        elif attribute.type == AttributeProto.GRAPHS:
            yield from attribute.graphs


def defined_names(graph: GraphProto) -> set[str]:
    """Names a (sub)graph defines itself: its inputs, initializers and node outputs."""
    names = {v.name for v in graph.input} | {t.name for t in graph.initializer}
    names |= {s.values.name for s in graph.sparse_initializer}
    names.update(name for node in graph.node for name in node.output)
    return names - {""}


def captured_names(node: NodeProto) -> set[str]:
    """Outer-scope tensors that ``node``'s subgraphs read (recursively)."""
    captured: set[str] = set()
    for graph in subgraphs(node):
        used = {v.name for v in graph.output}
        for inner in graph.node:
            used.update(inner.input)
            used |= captured_names(inner)
        captured |= used - defined_names(graph)
    return captured - {""}


def reads_of(node: NodeProto) -> list[str]:
    """Every tensor ``node`` reads, inputs first, without repeats or empty names."""
    names = dict.fromkeys(name for name in node.input if name)
    names.update(dict.fromkeys(sorted(captured_names(node))))
    return list(names)


@dataclass
class Graph:
    """The schedule of one ONNX graph and what every step reads and writes."""

    steps: list[NodeProto]  # runtime nodes; steps[i] runs at step i
    positions: list[int]  # steps[i] is node number positions[i] of the graph
    inputs: list[str]  # graph inputs the caller feeds (initializers excluded)
    outputs: list[str]  # graph outputs
    constants: set[str]  # initializers and the outputs of constant (folded) nodes
    producer: dict[str, int] = field(default_factory=dict)  # runtime tensor -> its step
    readers: dict[str, list[int]] = field(default_factory=dict)  # tensor -> steps reading it
    types: dict[str, TypeProto] = field(default_factory=dict)  # tensor -> inferred type

    @property
    def horizon(self) -> int:
        """One past the last step (at least 1, so that inputs and outputs can live)."""
        return max(1, len(self.steps))

    def runtime_weights(self) -> list[str]:
        """Constants a step reads, or the graph returns: what a runtime must hold."""
        used = [name for name in self.readers if name in self.constants]
        used += [name for name in self.outputs if name in self.constants and name not in used]
        return used


def value_types(graph: GraphProto) -> dict[str, TypeProto]:
    """The declared or inferred type of every tensor of ``graph`` (not of its subgraphs)."""
    types = {}
    for value_info in (*graph.input, *graph.value_info, *graph.output):
        if value_info.type.WhichOneof("value") is not None:
            types.setdefault(value_info.name, value_info.type)
    for tensor in graph.initializer:
        proto = TypeProto()
        proto.tensor_type.elem_type = tensor.data_type
        proto.tensor_type.shape.SetInParent()
        for d in tensor.dims:
            proto.tensor_type.shape.dim.add().dim_value = d
        types.setdefault(tensor.name, proto)
    return types


def analyze(model: ModelProto, *, source: str | None = None) -> Graph:
    """Walk ``model``'s nodes in order: steps, constants, producers and readers.

    ``types`` are those of the model as given: run it on the inferred model
    (and before inference too, for the clearest error about the structure).
    """
    graph = model.graph
    initializers = {t.name for t in graph.initializer} | \
        {s.values.name for s in graph.sparse_initializer}
    result = Graph(steps=[], positions=[],
                   inputs=[v.name for v in graph.input if v.name not in initializers],
                   outputs=[v.name for v in graph.output], constants=set(initializers),
                   types=inferred_types(model))
    made_by: dict[str, int] = {}  # tensor -> position of the node that makes it
    fed = set(result.inputs)  # a set: tens of thousands of KV-cache inputs on large decoders
    for position, node in enumerate(graph.node):
        for name in node.output:
            if not name:
                continue
            if name in made_by or name in initializers or name in fed:
                raise ProblemError(f"{describe(node, position)} writes tensor {name!r}, which "
                                   f"already has a value: every tensor must be written once",
                                   file=source)
            made_by[name] = position
    available = initializers | fed
    for position, node in enumerate(graph.node):
        reads = reads_of(node)
        for name in reads:
            if name in available:
                continue
            if name in made_by:
                raise ProblemError(
                    f"{describe(node, position)} reads tensor {name!r} before "
                    f"{describe(graph.node[made_by[name]], made_by[name])} writes it: the nodes "
                    f"are not in topological order", file=source)
            raise ProblemError(f"{describe(node, position)} reads tensor {name!r}, which no "
                               f"node, graph input or initializer provides", file=source)
        written = [name for name in node.output if name]
        available.update(written)
        if _is_constant(node, reads, result.constants):
            result.constants.update(written)
            continue
        step = len(result.steps)
        result.steps.append(node)
        result.positions.append(position)
        for name in reads:
            result.readers.setdefault(name, []).append(step)
        for name in written:
            result.producer[name] = step
    for name in result.outputs:
        if name not in available:
            raise ProblemError(f"graph output {name!r} is never written", file=source)
    return result


def inferred_types(model: ModelProto) -> dict[str, TypeProto]:
    """The types of ``model``'s tensors, after `infer`, with what the spec adds."""
    types = value_types(model.graph)
    _type_dropout_masks(model, types)
    return types


def _type_dropout_masks(model: ModelProto, types: dict[str, TypeProto]) -> None:
    """Dropout-7 (opsets 7 to 9) infers no type for its mask; its spec gives it the input's."""
    opset = max((o.version for o in model.opset_import if o.domain in STANDARD_DOMAINS),
                default=0)
    if opset >= 10:
        return
    for node in model.graph.node:
        if (node.op_type == "Dropout" and node.domain in STANDARD_DOMAINS
                and len(node.output) > 1 and node.output[1] and node.input
                and node.input[0] in types):
            mask = types.get(node.output[1])
            if mask is None or not mask.tensor_type.HasField("shape"):
                types[node.output[1]] = types[node.input[0]]


def _is_constant(node: NodeProto, reads: list[str], constants: set[str]) -> bool:
    if node.domain not in STANDARD_DOMAINS or node.op_type in NONDETERMINISTIC:
        return False
    if node.op_type == "Constant":
        return True
    return bool(reads) and all(name in constants for name in reads)
