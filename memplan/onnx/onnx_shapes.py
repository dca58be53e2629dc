"""Shapes ONNX's inference leaves unknown: constant shape computations folded, then
onnxruntime's symbolic shape inference.

ONNX's shape inference, even with data propagation, gives up where a shape
is computed through arithmetic it does not fold: a class token ``Expand``-ed
to the batch (CLIP, ViT), Swin's window padding (``Mod``, ``Sub``), the
causal mask decoders build from an attention mask. It names such a
dimension ``unk__N``, and the tensor has no exact size. `infer_shapes`
runs it, and only when a dimension stays unknown:

- folds the shape computations that read nothing but constants: a node of
  a shape computation's operators (`FOLDED`) whose inputs all have known
  values (the small tensors the weightless reader keeps, ``Constant``
  nodes, and earlier folds), or a ``Shape``/``Size`` of a tensor whose shape
  is known in numbers, is
  evaluated by onnx's ``ReferenceEvaluator`` (numpy; no code from the file)
  when its outputs are small (`FOLD_ELEMENTS` each, `FOLD_BUDGET` in all),
  and ONNX's inference runs again on a copy where its outputs are
  ``Constant`` nodes (at most `FOLD_ROUNDS` rounds, while one folds more);
- then, where dimensions are still unknown, onnxruntime's symbolic shape
  inference (``symbolic_shape_infer``: every shape a sympy expression) runs
  on that copy, every tensor without values (a weight) given to it as a
  graph input of its type, so no weight is read; it fills the dimensions
  ONNX's left open, and names a fresh symbol for one that truly depends on
  data (``NonZero``, a ``Reshape`` to a shape read from an input), which
  the user may bind;
- the inferred types go onto the user's graph: its nodes and tensors are
  those of the file, only ``value_info`` changes;
- without onnxruntime (the ``prove`` extra), or when its inference fails,
  the note returned says so in one line, for the error an unknown size
  raises.

Cost: one ONNX inference for a model whose shapes it finds; otherwise one
per folding round, the folds (small tensors), and one symbolic inference.
"""

from __future__ import annotations

import logging
import math

import numpy as np
from onnx import (
    GraphProto,
    ModelProto,
    NodeProto,
    TensorProto,
    TypeProto,
    ValueInfoProto,
    helper,
    numpy_helper,
)

from memplan.onnx.onnx_graph import STANDARD_DOMAINS, infer, value_types
from memplan.onnx.onnx_types import ELEMENT_BITS

FOLD_ELEMENTS = 1 << 16  # elements of one folded tensor at most
FOLD_BUDGET = 1 << 22  # elements of all folded tensors of a model together (32 MiB of int64)
FOLD_ROUNDS = 8  # ONNX inferences after folds, at most
# The inputs that give an output's shape (their length its rank), and the longest such
# input the symbolic inference is given: it makes a symbol per dimension, in Python, so a
# declared length of 2^31 would take minutes and gigabytes
SHAPE_INPUTS = {"ConstantOfShape": 0, "Reshape": 1, "Expand": 1, "Tile": 1, "Resize": 3}
MOST_RANK = 1024
# The operators of shape computations, each O(elements) in onnx's reference implementation
# (a Conv or MatMul of two small tensors may take minutes there: never folded)
FOLDED = frozenset({
    "Abs", "Add", "And", "ArgMax", "ArgMin", "Cast", "CastLike", "Ceil", "Clip", "Concat",
    "Constant", "ConstantOfShape", "CumSum", "Div", "Equal", "Expand", "EyeLike", "Flatten",
    "Floor", "Gather", "GatherElements", "GatherND", "Greater", "GreaterOrEqual", "Identity",
    "IsInf", "IsNaN", "Less", "LessOrEqual", "Max", "Min", "Mod", "Mul", "Neg", "Not", "OneHot",
    "Or", "Pad", "Pow", "Range", "Reciprocal", "ReduceMax", "ReduceMin", "ReduceProd",
    "ReduceSum", "Reshape", "Round", "ScatterElements", "ScatterND", "Shape", "Sign", "Size",
    "Slice", "Split", "Sqrt", "Squeeze", "Sub", "Sum", "Tile", "Transpose", "Trilu",
    "Unsqueeze", "Where", "Xor",
})
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


def _add_input(graph: GraphProto, name: str, tensor: TensorProto) -> None:
    value_info = graph.input.add(name=name)
    value_info.type.tensor_type.elem_type = tensor.data_type
    value_info.type.tensor_type.shape.SetInParent()
    for dim in tensor.dims:
        value_info.type.tensor_type.shape.dim.add().dim_value = dim


def _weights_as_inputs(model: ModelProto) -> ModelProto:
    """A copy of ``model`` whose tensors without values are graph inputs of their type.

    An initializer becomes an input; a ``Constant`` node becomes an
    ``Identity`` of a new input, in its place (the symbolic inference names
    fresh symbols after node positions: the same file gives the same names).
    """
    copy = ModelProto()
    copy.CopyFrom(model)
    graph = copy.graph
    kept = [t for t in graph.initializer if _has_values(t)]
    for tensor in graph.initializer:
        if not _has_values(tensor) and tensor.data_type in ELEMENT_BITS:
            _add_input(graph, tensor.name, tensor)
    del graph.initializer[:]
    graph.initializer.extend(kept)
    names = {name for node in graph.node for name in (*node.input, *node.output)}
    for node in graph.node:
        value = next((a.t for a in node.attribute if a.name == "value" and a.HasField("t")),
                     None)
        if node.op_type != "Constant" or value is None or _has_values(value) or \
                value.data_type not in ELEMENT_BITS:
            continue
        name = node.output[0] + "::value"
        while name in names:
            name += "'"
        names.add(name)
        _add_input(graph, name, value)
        node.op_type, node.domain = "Identity", ""
        del node.attribute[:]
        node.input[:] = [name]
    return copy


def _longest_shape_input(inferred: ModelProto, model: ModelProto) -> str:
    """A note when a shape input is declared longer than `MOST_RANK`, else ''."""
    declared = (value_types(inferred.graph), value_types(model.graph))
    dims = {tensor.name: tuple(tensor.dims) for tensor in model.graph.initializer}
    for node in model.graph.node:
        position = SHAPE_INPUTS.get(node.op_type)
        if position is None or len(node.input) <= position:
            continue
        name = node.input[position]
        lengths = [_numbers(types.get(name)) for types in declared] + [dims.get(name)]
        length = max((n for n in lengths if n is not None and len(n) == 1), default=None)
        if length is not None and length[0] > MOST_RANK:
            return (f"; the shape input {name!r} of node {node.name!r} "
                    f"({node.op_type}) is declared {length[0]} long, past the {MOST_RANK} "
                    "dimensions the symbolic inference is given")
    return ""


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


def infer_shapes(bound: ModelProto, *, strict: bool,
                 source: str | None) -> tuple[ModelProto, str]:
    """``(bound with inferred types, note)``; see the module docstring.

    ``bound`` is the weightless model with the user's dims bound. The note is
    empty, or says in one line why some shapes could not be found, for the
    error an unknown size raises. Raises `ProblemError` when ONNX's
    inference fails (as `onnx_graph.infer`).
    """
    inferred = infer(bound, strict=strict, source=source)
    if not unknown_tensors(inferred):
        return inferred, ""
    values: dict[str, np.ndarray] = {}
    budget = [FOLD_BUDGET]
    current, folded = bound, [False] * len(bound.graph.node)
    for _ in range(FOLD_ROUNDS):
        if not _fold(bound, value_types(inferred.graph), values, budget):
            break
        current, folded = _with_constants(bound, values)
        inferred = infer(current, strict=strict, source=source)
        if not unknown_tensors(inferred):
            break
    note = _complete(inferred, current) if unknown_tensors(inferred) else ""
    return _on_users_graph(bound, inferred, folded), note


# ------------------------------------------------------------------ constant folding
def _numbers(type_proto: TypeProto | None) -> tuple[int, ...] | None:
    """The shape of a tensor type when every dimension is a number, else None."""
    if type_proto is None or not type_proto.HasField("tensor_type") or \
            not type_proto.tensor_type.HasField("shape"):
        return None
    dims = type_proto.tensor_type.shape.dim
    if not all(dim.HasField("dim_value") for dim in dims):
        return None
    return tuple(dim.dim_value for dim in dims)


def _shape_of(node: NodeProto, shape: tuple[int, ...]) -> np.ndarray:
    """``Shape`` (with its ``start`` and ``end``) or ``Size`` of a tensor of ``shape``."""
    if node.op_type == "Size":
        return np.asarray(math.prod(shape), np.int64)
    attributes = {a.name: a.i for a in node.attribute}
    start, end = attributes.get("start", 0), attributes.get("end", len(shape))
    return np.asarray(shape[start:end] if end else shape[start:0], np.int64)


def _evaluate(node: NodeProto, feeds: dict[str, np.ndarray],
              opsets) -> list[np.ndarray] | None:
    """``node``'s outputs on ``feeds`` by onnx's ReferenceEvaluator, or None if it fails."""
    from onnx.reference import ReferenceEvaluator

    inputs = [helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(v.dtype),
                                            v.shape) for name, v in feeds.items()]
    outputs = [ValueInfoProto(name=name) for name in node.output if name]
    model = helper.make_model(helper.make_graph([node], "fold", inputs, outputs),
                              opset_imports=opsets)
    try:
        return [np.asarray(value) for value in ReferenceEvaluator(model).run(None, feeds)]
    except Exception:  # an operator it lacks, or inputs it refuses: not folded
        return None


def _elements(node: NodeProto, feeds: dict[str, np.ndarray]) -> float:
    """Elements of the largest output the operators that make tensors from values make, from
    those values alone (before anything is allocated); 0 for the other operators."""
    args = [feeds.get(name) for name in node.input]
    try:
        if node.op_type == "ConstantOfShape":
            return float(np.prod(args[0].astype(np.float64)))
        if node.op_type == "Expand":
            shape = np.broadcast_shapes(args[0].shape, tuple(int(d) for d in args[1]))
            return float(np.prod(np.asarray(shape, np.float64)))
        if node.op_type == "Tile":
            return float(np.prod(np.asarray(args[0].shape) * args[1].astype(np.float64)))
        if node.op_type == "Range":
            start, limit, delta = (float(np.asarray(a).reshape(-1)[0]) for a in args[:3])
            return max(0.0, math.ceil((limit - start) / delta)) if delta else math.inf
        if node.op_type == "OneHot":
            return float(args[0].size) * abs(float(np.asarray(args[1]).reshape(-1)[0]))
        if node.op_type == "Pad":
            return float(np.prod(np.asarray(args[0].shape) + np.abs(
                args[1].astype(np.float64)).reshape(2, -1).sum(axis=0)))
    except (ValueError, TypeError, IndexError, OverflowError, AttributeError):
        return math.inf  # malformed: not folded
    return 0.0


def _fold(model: ModelProto, types: dict[str, TypeProto], values: dict[str, np.ndarray],
          budget: list[int]) -> bool:
    """Fold what can be folded now into ``values``; whether anything was."""
    for tensor in model.graph.initializer:
        if tensor.name not in values and _has_values(tensor) and \
                math.prod(tensor.dims) <= FOLD_ELEMENTS:
            try:
                values[tensor.name] = numpy_helper.to_array(tensor)
            except ValueError:  # its data disagrees with its dims: not folded
                continue
    progress = False
    for node in model.graph.node:
        outputs = [name for name in node.output if name]
        if not outputs or all(name in values for name in outputs) or \
                node.domain not in STANDARD_DOMAINS or node.op_type not in FOLDED:
            continue
        shapes = [_numbers(types.get(name)) for name in outputs]
        if any(shape is None or math.prod(shape) > FOLD_ELEMENTS for shape in shapes) or \
                sum(math.prod(shape) for shape in shapes) > budget[0]:
            continue
        if node.op_type in ("Shape", "Size"):
            shape = _numbers(types.get(node.input[0]))
            results = None if shape is None else [_shape_of(node, shape)]
        elif all(name in values for name in node.input if name):
            feeds = {name: values[name] for name in node.input if name}
            if _elements(node, feeds) > FOLD_ELEMENTS:
                continue  # the file's types said otherwise: it lies, or inference was wrong
            results = _evaluate(node, feeds, model.opset_import)
        else:
            continue
        if results is None or len(results) != len(outputs) or any(
                value.shape != shape or value.dtype.kind not in "biuf"
                for value, shape in zip(results, shapes, strict=True)):
            continue
        values.update(zip(outputs, results, strict=True))
        budget[0] -= sum(value.size for value in results)
        progress = True
    return progress


def _with_constants(model: ModelProto, values: dict[str, np.ndarray]
                    ) -> tuple[ModelProto, list[bool]]:
    """A copy of ``model`` whose folded nodes are ``Constant`` nodes; which nodes were."""
    copy = ModelProto()
    copy.CopyFrom(model)
    nodes, folded = [], []
    for node in model.graph.node:
        outputs = [name for name in node.output if name]
        fold = bool(outputs) and all(name in values for name in outputs)
        folded.append(fold)
        nodes += [helper.make_node("Constant", [], [name], name=node.name,
                                   value=numpy_helper.from_array(values[name], name))
                  for name in outputs] if fold else [node]
    del copy.graph.node[:]
    copy.graph.node.extend(nodes)
    return copy, folded


def _on_users_graph(model: ModelProto, inferred: ModelProto, folded: list[bool]) -> ModelProto:
    """``inferred`` with ``model``'s own nodes where folds replaced them."""
    if not any(folded):
        return inferred
    nodes, position = [], 0
    for node, fold in zip(model.graph.node, folded, strict=True):
        if fold:
            nodes.append(node)
            position += len([name for name in node.output if name])
        else:
            nodes.append(inferred.graph.node[position])  # its subgraphs' inferred types
            position += 1
    del inferred.graph.node[:]
    inferred.graph.node.extend(nodes)
    return inferred


# ------------------------------------------------------------------ symbolic inference
def _complete(inferred: ModelProto, model: ModelProto) -> str:
    """Fill ``inferred``'s unknown shapes from the symbolic inference of ``model``; a note.

    ``model`` is the one ONNX's inference ran on. The note is empty, or says
    in one line why the shapes could not be filled.
    """
    unknown = unknown_tensors(inferred)
    try:
        import onnxruntime.tools.symbolic_shape_infer  # noqa: F401
    except ImportError:
        return INSTALL_NOTE
    too_long = _longest_shape_input(inferred, model)
    if too_long:
        return too_long
    try:
        symbolic = _symbolic(_weights_as_inputs(model))
    except Exception as error:  # its assertions, sympy's errors, ...
        first = next((line.strip() for line in str(error).splitlines() if line.strip()),
                     type(error).__name__)
        return f"; onnxruntime's symbolic shape inference failed: {first}"
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
    return ""


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


__all__ = ["FOLDED", "FOLD_BUDGET", "FOLD_ELEMENTS", "FOLD_ROUNDS", "INSTALL_NOTE",
           "free_symbols", "infer_shapes", "unknown_tensors"]
