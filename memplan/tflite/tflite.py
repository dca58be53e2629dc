"""TensorFlow Lite models (``.tflite``) in, `Problem` out, as TFLite-Micro plans them.

Why: a model run by TensorFlow Lite Micro (TFLM) gets its arena from TFLM's
own greedy planner at start-up, or from an offline plan stored in the model
(`memplan.tflite.tflm`). For memplan's plan to be comparable with TFLM's, and
to be usable as that offline plan, the problem must hold exactly the buffers
TFLM plans, with TFLM's sizes and lifetimes.

Steps (`from_tflite`):

- parse the flatbuffer with the schema module that the ``tflite-micro``
  package ships (the ``tflite`` extra); a file that is not a TFLite model
  (no ``TFL3`` identifier, truncated, corrupt) is refused naming the file;
- refuse what TFLM's planner or memplan cannot take: several subgraphs
  (control flow: IF, WHILE, CALL_ONCE), a negative dimension (dynamic
  shape), a type TFLM cannot size (strings, variants), an intermediate
  tensor of non-zero size (TFLM refuses those as well);
- one buffer per tensor that TFLM allocates: a tensor with no constant
  data (its buffer is empty) and a non-zero byte length, that is
  ``elements * type size``, rounded up to TFLM's 16-byte arena alignment
  (TFLM's planner adds the rounded size); every offset 16-aligned;
- lifetimes as TFLM's ``AllocationInfoBuilder`` marks them, in its
  allocation scopes: graph inputs from scope 0, operator ``i`` at scope
  ``i + 1`` creates its outputs and uses its inputs and outputs there,
  graph outputs last until the final scope. TFLM's lifetimes are inclusive
  ``[first_created, last_used]``; memplan's are half-open, so a buffer is
  ``[first_created, last_used + 1)`` over ``len(operators) + 1`` steps.
  A tensor TFLM never marks (scope -1) gets step 0, which conflicts with
  no more than TFLM's own reading does;
- variable tensors (``is_variable``: recurrent state) live the whole run;
  TFLM keeps them in its persistent tail unless an offline plan places them,
  which memplan's does;
- no aliases: TFLM gives every tensor its own bytes (a Reshape copies);
- the problem's ``steps`` name each operator (``#i``, its builtin op) and
  the buffers it reads and writes (for `memplan.explain`);
- the scratch buffers that TFLM's reference kernels request in their
  Prepare (``RequestScratchBufferInArena``), where the size follows from the
  shapes (`scratch_requests`: MEAN and SUM, REDUCE_MAX/MIN/ALL, int8 and
  int16 TRANSPOSE_CONV, int4 filters of CONV_2D, DEPTHWISE_CONV_2D and
  FULLY_CONNECTED): kind ``scratch``, alive for their operator's step.
  TFLM places these itself around an offline plan (they are -1 in it), in
  the lowest gap that fits: a step's only scratch buffer lands at or below
  the gap memplan kept for it (several at one step usually do too), so
  TFLM's arena is memplan's. ``scratch=False`` leaves them out.

Buffer ids are the tensor names; an empty or repeated name gets ``#index``
appended (`tensor_ids` gives every tensor's id in tensor order, the list an
offline plan is written against). Kinds: ``input``, ``output``,
``activation``. Cost: O(tensors + operator inputs and outputs).

Not planned here: the scratch of kernels not listed (ADD_N, MIRROR_PAD,
SVDF, LSTM, DETECTION_POSTPROCESS, and optimised kernel libraries' own, e.g.
CMSIS-NN's): TFLM still places those, around the plan.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from memplan.bounds import live_bytes
from memplan.errors import ProblemError
from memplan.problem import Buffer, Problem, Step

EXTRA = "tflite"  # the optional extra that brings the parser: pip install 'memplan[tflite]'
ALIGNMENT = 16  # TFLM's MicroArenaBufferAlignment(): offsets and planned sizes
FILE_IDENTIFIER = b"TFL3"
CONTROL_FLOW = ("IF", "WHILE", "CALL_ONCE", "CALL")
MAX_TABLES = 1 << 20  # tensors, operators...: far above any model (a few 10^4), a few GiB unfolded

# bytes per element of each TensorType name, as TFLM's TfLiteTypeSizeOf gives them
TYPE_SIZES = {
    "FLOAT16": 2, "BFLOAT16": 2, "FLOAT32": 4, "FLOAT64": 8, "INT16": 2, "INT32": 4,
    "UINT32": 4, "UINT8": 1, "UINT16": 2, "INT8": 1, "INT64": 8, "UINT64": 8, "BOOL": 1,
    "RESOURCE": 4, "COMPLEX64": 8, "COMPLEX128": 16, "INT4": 1,
}


def schema():
    """The TFLite flatbuffer schema module (from ``tflite-micro``), or a one-line error."""
    try:
        from tflite_micro.tensorflow.lite.micro.python import schema_py_generated
    except ImportError:
        raise ProblemError(f".tflite models need the {EXTRA!r} extra: "
                           f"pip install 'memplan[{EXTRA}]'") from None
    return schema_py_generated


def model_bytes(model: str | os.PathLike | bytes | bytearray) -> tuple[bytes, str | None]:
    """The flatbuffer's bytes and the file name (None for bytes given directly)."""
    if isinstance(model, bytes | bytearray | memoryview):
        return bytes(model), None
    path = str(model)
    try:
        with open(path, "rb") as handle:
            return handle.read(), path
    except OSError as error:
        raise ProblemError(error.strerror or "cannot read the file", file=path) from None


def read_model(model: str | os.PathLike | bytes | bytearray, *, file: str | None = None):
    """The model as the schema's object tree (``ModelT``); malformed input is refused."""
    data, path = model_bytes(model)
    file = file or path
    fb = schema()
    if len(data) < 8 or data[4:8] != FILE_IDENTIFIER:
        raise ProblemError("not a TFLite model (no 'TFL3' file identifier)", file=file)
    try:
        root = fb.Model.GetRootAs(data, 0)
        limit = min(MAX_TABLES, len(data) // 4 + 1024)
        if object_count(root, limit) is None:
            raise ProblemError(f"more than {MAX_TABLES} tables (tensors, operators...): more "
                               "than memplan reads" if limit == MAX_TABLES else
                               f"more tables than its {len(data)} bytes can hold: tables "
                               "referenced many times over (a corrupt file?)", file=file)
        return fb.ModelT.InitFromObj(root)
    except ProblemError:
        raise
    except Exception as error:  # a corrupt flatbuffer fails anywhere inside the generated code
        raise ProblemError(f"corrupt TFLite flatbuffer ({type(error).__name__}: {error})",
                           file=file) from None


def object_count(root: Any, limit: int) -> int | None:
    """How many tables the schema's object API would build from ``root``, or None past
    ``limit``: counted on the lazy accessors, stopping there.

    Why: a flatbuffer may point many times at one table (a vector of a million offsets
    to one subgraph, each holding a million offsets to one tensor); the object API
    builds a copy per reference, a file of kilobytes unfolding into billions of
    objects. Each table of a file whose references are not shared takes a four-byte
    offset of its own, so ``len(data) // 4`` (plus slack) bounds an honest count;
    vectors of numbers become numpy views and cost nothing here.
    """
    count = 0

    def add(n: int) -> bool:
        nonlocal count
        count += n
        return count <= limit

    if not add(root.OperatorCodesLength() + root.BuffersLength() + root.MetadataLength()
               + root.SignatureDefsLength() + root.SubgraphsLength()):
        return None
    for k in range(root.SignatureDefsLength()):
        signature = root.SignatureDefs(k)
        if not add(signature.InputsLength() + signature.OutputsLength()):
            return None
    for g in range(root.SubgraphsLength()):
        subgraph = root.Subgraphs(g)
        if not add(subgraph.TensorsLength() + subgraph.OperatorsLength()):
            return None
        for o in range(subgraph.OperatorsLength()):
            op = subgraph.Operators(o)
            if not add((op.BuiltinOptions() is not None) + (op.BuiltinOptions2() is not None)):
                return None
        for t in range(subgraph.TensorsLength()):
            tensor = subgraph.Tensors(t)
            sparsity = tensor.Sparsity()
            if not add((tensor.Quantization() is not None) + tensor.VariantTensorsLength()
                       + (1 + sparsity.DimMetadataLength() if sparsity is not None else 0)):
                return None
    return count


def _names(enum_class) -> dict[int, str]:
    return {value: name for name, value in vars(enum_class).items() if not name.startswith("_")}


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else (value or "")


def tensor_ids(model: Any) -> list[str]:
    """The buffer id of every tensor of the (first) subgraph, in tensor order."""
    model = model if hasattr(model, "subgraphs") else read_model(model)
    ids, seen = [], set()
    for index, tensor in enumerate(model.subgraphs[0].tensors or []):
        name = _text(tensor.name)
        id = name if name and name not in seen else f"{name}#{index}"
        while id in seen:  # a later tensor may already be called "name#index"
            id += "'"
        seen.add(id)
        ids.append(id)
    return ids


def operator_name(model: Any, op: Any) -> str:
    """The builtin operator's name (``CONV_2D``), or the custom code."""
    code = model.operatorCodes[op.opcodeIndex]
    builtin = max(code.builtinCode, code.deprecatedBuiltinCode)
    if code.customCode:
        return _text(code.customCode)
    return _names(schema().BuiltinOperator).get(builtin, str(builtin))


def is_constant(model: Any, tensor: Any) -> bool:
    """True when the tensor's data is in the model (weights): TFLM never plans it."""
    buffers = model.buffers or []
    buffer = buffers[tensor.buffer] if 0 <= tensor.buffer < len(buffers) else None
    if buffer is None:
        return False
    return (buffer.data is not None and len(buffer.data) > 0) or buffer.offset > 1


def tensor_bytes(tensor: Any, *, file: str | None = None, id: str = "") -> int:
    """Elements times type size, as TFLM's ``TfLiteEvalTensorByteLength`` (scalars: 1)."""
    type_name = _names(schema().TensorType).get(tensor.type, str(tensor.type))
    if type_name not in TYPE_SIZES:
        raise ProblemError(f"tensor type {type_name} has no size in TFLite-Micro",
                           file=file, buffer=id)
    shape = [] if tensor.shape is None else [int(d) for d in tensor.shape]
    if any(d < 0 for d in shape):
        raise ProblemError(f"dynamic shape {shape}: TFLite-Micro needs static shapes",
                           file=file, buffer=id)
    return math.prod(shape) * TYPE_SIZES[type_name]


def scratch_requests(model: Any, op: Any) -> list[int]:
    """Bytes of each scratch buffer TFLM's reference kernel for ``op`` requests in Prepare.

    Mirrors the kernels' ``RequestScratchBufferInArena`` calls for the
    operators whose request follows from shapes and types alone (see the
    module docstring); [] for every other operator.
    """
    tensors = model.subgraphs[0].tensors
    ins, outs = indices(op.inputs), indices(op.outputs)
    name = operator_name(model, op)
    types = _names(schema().TensorType)

    def count(t: int) -> int:
        shape = tensors[t].shape
        return 1 if shape is None else math.prod(int(d) for d in shape)

    def rank(t: int) -> int:
        return 0 if tensors[t].shape is None else len(tensors[t].shape)

    def type_of(t: int) -> str:
        return types.get(tensors[t].type, "")

    if name in ("MEAN", "SUM") and len(ins) >= 2 and outs:
        wide = [4 * count(outs[0])] if type_of(ins[0]) in ("INT8", "INT16") else []
        return [*wide, 4 * rank(ins[0]), 4 * count(ins[1])]
    if name in ("REDUCE_MAX", "REDUCE_MIN", "REDUCE_ALL") and len(ins) >= 2:
        return [4 * rank(ins[0]), 4 * count(ins[1])]
    if name == "TRANSPOSE_CONV" and len(ins) >= 3 and outs:
        kind = type_of(ins[2])  # inputs: output shape, weights, input, bias
        if kind == "INT8":
            return [4 * count(outs[0])]
        if kind == "INT16":
            bias = [8 * count(ins[3])] if len(ins) > 3 and type_of(ins[3]) == "INT16" else []
            return [*bias, 8 * count(outs[0])]
    if name in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED") and len(ins) >= 2 \
            and type_of(ins[1]) == "INT4":
        return [count(ins[1])]
    return []


def lifetimes(model: Any) -> tuple[list[int], list[int], int]:
    """TFLM's ``(first_created, last_used)`` scope of every tensor, and the last scope.

    Mirrors ``AllocationInfoBuilder::MarkAllocationLifetimes`` for one subgraph;
    -1 where TFLM marks nothing.
    """
    subgraph = model.subgraphs[0]
    count = len(subgraph.tensors or [])
    first, last = [-1] * count, [-1] * count
    scope = 0
    for t in indices(subgraph.inputs):
        first[t] = 0 if first[t] == -1 else first[t]
        last[t] = scope
    for op in subgraph.operators or []:
        scope += 1
        outputs = indices(op.outputs)
        for t in outputs:
            first[t] = scope if first[t] == -1 else first[t]
        for t in indices(op.inputs) + outputs:
            last[t] = scope
    for t in indices(subgraph.outputs):
        first[t] = scope if first[t] == -1 else first[t]
        last[t] = scope
    return first, last, scope


def _aligned(size: int) -> int:
    return -(-size // ALIGNMENT) * ALIGNMENT


def indices(values) -> list[int]:
    """Tensor indices of an index vector (None: none; -1, an omitted optional input, left out).

    The schema gives numpy arrays, whose truth value is not their emptiness.
    """
    return [] if values is None else [int(v) for v in values if int(v) >= 0]


def _check_index_list(values, count: int, field: str, of: str, *, file: str | None,
                      optional: bool = False) -> None:
    """Each index of ``values`` below ``count`` (-1, an omitted optional input, if ``optional``)."""
    for value in [] if values is None else [int(v) for v in values]:
        if not (0 <= value < count or (optional and value == -1)):
            raise ProblemError(f"{field}: index {value} is past the {count} {of} "
                               "(a corrupt file?)", file=file)


def check_indices(model: Any, *, file: str | None = None) -> None:
    """Refuse, naming the field, any index of the schema that points past its list.

    The fields: operators' ``opcodeIndex``, ``inputs``, ``outputs`` and
    ``intermediates``; the subgraphs' ``inputs`` and ``outputs``; tensors'
    ``buffer``; ``metadataBuffer`` and the metadata entries' ``buffer``; the
    signatures' ``subgraphIndex`` and ``tensorIndex``. A flatbuffer that parses
    may still hold any of these corrupt, and every reader indexes with them.
    """
    subgraphs, buffers = model.subgraphs or [], len(model.buffers or [])
    codes = len(model.operatorCodes or [])
    for g, sg in enumerate(subgraphs):
        tensors = len(sg.tensors or [])
        for i, op in enumerate(sg.operators or []):
            _check_index_list([op.opcodeIndex], codes, f"subgraph {g} operator {i} opcodeIndex",
                              "operator codes", file=file)
            for part in ("inputs", "outputs", "intermediates"):
                _check_index_list(getattr(op, part), tensors, f"subgraph {g} operator {i} "
                                  f"{part}", "tensors", file=file, optional=part == "inputs")
        for part in ("inputs", "outputs"):
            _check_index_list(getattr(sg, part), tensors, f"subgraph {g} {part}", "tensors",
                              file=file)
        for t, tensor in enumerate(sg.tensors or []):
            _check_index_list([tensor.buffer], buffers, f"subgraph {g} tensor {t} buffer",
                              "buffers", file=file)
    _check_index_list(model.metadataBuffer, buffers, "metadataBuffer", "buffers", file=file)
    for m, entry in enumerate(model.metadata or []):
        _check_index_list([entry.buffer], buffers, f"metadata {m} buffer", "buffers", file=file)
    for k, signature in enumerate(model.signatureDefs or []):
        _check_index_list([signature.subgraphIndex], len(subgraphs),
                          f"signature {k} subgraphIndex", "subgraphs", file=file)
        tensors = len(subgraphs[signature.subgraphIndex].tensors or [])
        for part in ("inputs", "outputs"):
            _check_index_list([entry.tensorIndex for entry in getattr(signature, part) or []],
                              tensors, f"signature {k} {part} tensorIndex", "tensors", file=file)


def check_supported(model: Any, *, file: str | None = None) -> None:
    """Refuse, in one line, a model TFLM's planner or memplan cannot take as one problem."""
    subgraphs = model.subgraphs or []
    if not subgraphs:
        raise ProblemError("the model has no subgraph", file=file)
    check_indices(model, file=file)
    flow = sorted({operator_name(model, op) for sg in subgraphs for op in sg.operators or []}
                  & set(CONTROL_FLOW))
    if len(subgraphs) > 1 or flow:
        what = f" (control flow: {', '.join(flow)})" if flow else ""
        raise ProblemError(f"{len(subgraphs)} subgraphs{what}: memplan plans models of "
                           "one subgraph", file=file)
    subgraph = subgraphs[0]
    ids = tensor_ids(model)
    for i, op in enumerate(subgraph.operators or []):
        for t in indices(op.intermediates):
            if tensor_bytes(subgraph.tensors[t], file=file, id=ids[t]):
                raise ProblemError(f"operator {i} ({operator_name(model, op)}) has an "
                                   "intermediate tensor of non-zero size (TFLite-Micro "
                                   "refuses it)", file=file, buffer=ids[t])


def from_tflite(model: str | os.PathLike | bytes | bytearray, *, name: str | None = None,
                scratch: bool = True, **options: Any) -> Problem:
    """A ``.tflite`` model (a path or its bytes) as the problem TFLite-Micro plans.

    ``scratch`` adds the scratch buffers of the kernels `scratch_requests` knows.
    """
    if options:
        raise TypeError(f"from_tflite() takes no options {sorted(options)}")
    data, file = model_bytes(model)
    tree = read_model(data, file=file)
    check_supported(tree, file=file)
    subgraph = tree.subgraphs[0]
    ids = tensor_ids(tree)
    first, last, final = lifetimes(tree)
    inputs, outputs = set(indices(subgraph.inputs)), set(indices(subgraph.outputs))
    buffers = []
    for t, tensor in enumerate(subgraph.tensors or []):
        if is_constant(tree, tensor):
            continue
        size = tensor_bytes(tensor, file=file, id=ids[t])
        if size == 0:
            continue
        if tensor.isVariable:
            start, end = 0, final + 1
        else:
            start, end = max(first[t], 0), max(last[t], 0) + 1
        kind = "input" if t in inputs else "output" if t in outputs else "activation"
        buffers.append(Buffer(ids[t], _aligned(size), start, end, alignment=ALIGNMENT,
                              kind=kind))
    taken = set(ids)
    for step, op in enumerate(subgraph.operators or [], start=1) if scratch else ():
        for k, size in enumerate(scratch_requests(tree, op)):
            if size:
                id = f"{operator_name(tree, op)}@{step}:scratch{k}"
                while id in taken:
                    id += "'"
                taken.add(id)
                buffers.append(Buffer(id, _aligned(size), step, step + 1, alignment=ALIGNMENT,
                                      kind="scratch"))
    label = name if name is not None else (Path(file).stem if file else "tflite")
    planned = {b.id for b in buffers}
    steps = [Step()]  # step 0: the graph inputs arrive; operator i runs at step i + 1
    for step, op in enumerate(subgraph.operators or [], start=1):
        writes = [ids[t] for t in indices(op.outputs) if ids[t] in planned]
        writes += [b.id for b in buffers if b.kind == "scratch" and b.start == step]
        steps.append(Step(f"#{step - 1}", operator_name(tree, op),
                          tuple(ids[t] for t in indices(op.inputs) if ids[t] in planned),
                          tuple(writes)))
    problem = Problem(buffers, name=label, source=file, steps=steps)
    return problem.replace(widths=live_bytes(problem)) if len(problem) else problem
