"""Run an ONNX model inside one byte arena at a plan's offsets: the end-to-end proof of a plan.

The validator checks a plan against its problem; it cannot check that the
problem tells the truth about the model. A lifetime too short, or an alias
that lets a live tensor be overwritten, gives a plan the validator accepts
and a runtime that computes garbage. This module executes the model the way
a runtime with that plan would, and compares:

- one numpy ``uint8`` arena per region, filled with a poison byte, as large
  as the plan's offsets reach (a plan with an offset below 0, or whose arena
  is above both `MAX_ARENA` and twice its buffers' bytes, is refused in one
  line: there is no such arena to run in); every tensor that is a buffer of the problem
  lives there at its planned offset, and nowhere else. Graph inputs (and
  weights planned in a region) are written before the first step;
- the nodes run one by one in the graph's order (onnxruntime, or onnx's
  ReferenceEvaluator, on a one-node model per node; the sessions are kept).
  A node reads its inputs (and the outer tensors its subgraphs capture) as
  bytes from the arena and writes its outputs as bytes to the arena, so
  aliased buffers really share bytes: a view rewrites the very bytes its
  input already holds, an in-place output overwrites its input;
- an element-wise node whose output shares bytes with one of its inputs is
  also run as an in-place kernel runs it: element i reads its inputs (as
  broadcast), then writes, in order; where it reads bytes an earlier element
  already wrote, the node is rerun on what it reads until that settles, and
  a result other than the normal one is a `Corruption` (a broadcast or
  retyped input under its output);
- random operators (RandomUniformLike, ...) write their values of the normal
  run: the same random stream in both runs;
- every read is compared bit for bit with what was last written to that
  tensor (a digest per write), and the graph outputs are read from the arena
  after the last step. A changed or never-written tensor is a `Corruption`
  naming the tensor, its reader and the tensors written over its bytes
  since. Bitwise, because a corrupted tensor can vanish from the final
  output (the light models' uniform weights make their softmax constant);
- the graph outputs are compared with a normal run: the same one-node
  sessions on a plain dictionary, outside the arena, bit for bit. That is
  the verdict: like with like, so only a plan that changed a tensor fails.
  One run of the whole model is reported beside it, with its largest
  difference (a check of the node-by-node machinery, not of the plan: the
  whole-model session prepacks weights and may fuse nodes, so it rounds
  otherwise; not for outputs computed from a random operator).
  `memplan.onnx.prove` runs this on a plan file (``memplan prove``).

It never opens a file named inside the model: a model whose weights are in
external data is refused. Tensors that are not buffers of the problem
(weights, zero-size tensors) live outside the arena, with their values from
the normal run; a node that writes one must read nothing from the arena (or
the tensor must be empty), else the problem does not describe this model and
`ProblemError` says so. Scratch buffers are not used: the evaluators keep
their workspace (and control-flow subgraphs) to themselves.

Limits: only element-wise nodes are run as in-place kernels (other nodes
read all their inputs before writing; the frontend offers in place to
element-wise operators only), and an input of BatchNormalization other than
X is read whole first; a backend that fails is a one-line `ProblemError`
naming the node; types that numpy stores unpacked (int4, float4, ...) do
not match their packed sizes and are refused, and so is the
ReferenceEvaluator's bool mask of an opset 7-9 Dropout (its spec says
float). Cost: one model run per plan plus one normal run per input set;
O(arena) memory per region; an in-place kernel's emulation takes
O(elements x bytes per element) memory and one rerun of the node per round
(at most `IN_PLACE_ROUNDS`), only where an output overlaps an input other
than element over element.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import GraphProto, ModelProto, NodeProto, TensorProto, helper

from memplan.errors import ProblemError, require
from memplan.onnx import BACKENDS
from memplan.onnx.onnx_aliases import ELEMENTWISE
from memplan.onnx.onnx_graph import (
    STANDARD_DOMAINS,
    bind_dims,
    load_model,
    reads_of,
    subgraphs,
)
from memplan.onnx.onnx_types import tensor_type
from memplan.plan import Plan
from memplan.problem import Problem

POISON = 0xA5  # the arena's bytes before anything is written: NaN-like garbage
RANDOM_OPS = frozenset({"RandomNormal", "RandomNormalLike", "RandomUniform",
                        "RandomUniformLike", "Multinomial", "Bernoulli"})
IN_PLACE_ROUNDS = 64  # reruns of a node to settle what an in-place kernel writes
MAX_ARENA = 1 << 30  # bytes: a larger arena is allocated only up to twice the buffers' bytes


@dataclass(frozen=True)
class Corruption:
    """A tensor read from the arena with other bytes than were written to it."""

    tensor: str
    reader: str  # the node that read it, or "the caller" for a graph output
    overwritten_by: tuple[str, ...]  # tensors written over its bytes since it was written
    detail: str = ""  # what happened, when it is not a changed read (an in-place kernel)

    def __str__(self) -> str:
        if self.detail:
            return f"{self.tensor!r} {self.detail}"
        if not self.overwritten_by:
            return f"{self.tensor!r} read by {self.reader} before anything wrote it"
        return (f"{self.tensor!r} read by {self.reader} after {', '.join(self.overwritten_by)} "
                f"overwrote its bytes")


def arena_text(arena_bytes: list[int]) -> str:
    """``3.747 MiB (3928576 B)``; regions joined by `` + ``: bytes as every command shows them."""
    from memplan.viz import show_bytes

    return " + ".join(map(show_bytes, arena_bytes)) or "0 B"


@dataclass
class ArenaReport:
    """What running a model inside a plan's arena showed."""

    outputs: dict[str, np.ndarray]  # graph outputs as read from the arena after the last step
    normal: dict[str, np.ndarray]  # the same outputs in a node-by-node run without arena
    expected: dict[str, np.ndarray]  # the same outputs in one run of the whole model
    corruptions: list[Corruption] = field(default_factory=list)  # reads of changed bytes
    arena_bytes: list[int] = field(default_factory=list)  # per region
    rtol: float = 1e-4  # relative tolerance of the comparison with the whole-model run
    random: set[str] = field(default_factory=set)  # outputs computed from a random operator

    def bitwise(self, name: str) -> bool:
        """Output ``name`` read from the arena has the very bytes of the normal run."""
        return (self.outputs[name].shape == self.normal[name].shape
                and self.outputs[name].tobytes() == self.normal[name].tobytes())

    def close(self, name: str) -> bool | None:
        """The normal run's ``name`` is close to the whole-model run's (None: random, not
        comparable). Not part of the verdict: the whole-model session may compute
        otherwise (prepacked weights, fused kernels) and round differently."""
        if name in self.random:
            return None
        normal, expected = self.normal[name], self.expected[name]
        if normal.shape != expected.shape or normal.dtype != expected.dtype:
            return False
        if normal.dtype.kind in "fc":
            return bool(np.allclose(normal, expected, rtol=self.rtol, atol=1e-6,
                                    equal_nan=True))
        return normal.tobytes() == expected.tobytes()

    def largest_difference(self, name: str) -> float | None:
        """The largest absolute difference of output ``name`` between the normal run and
        the whole-model run (None: random, or shapes or types differ)."""
        normal, expected = self.normal[name], self.expected[name]
        if name in self.random or normal.shape != expected.shape or \
                normal.dtype != expected.dtype:
            return None
        if normal.size == 0:
            return 0.0
        if normal.dtype.kind in "fciu":
            with np.errstate(invalid="ignore", over="ignore"):
                gap = np.abs(normal.astype(np.complex128 if normal.dtype.kind == "c"
                                           else np.float64) - expected)
            gap = np.where(_same_elements(normal, expected).reshape(normal.shape), 0.0, gap)
            return float(np.max(np.where(np.isnan(gap), np.inf, gap)))  # NaN beside a number
        return 0.0 if normal.tobytes() == expected.tobytes() else float("inf")

    @property
    def outputs_match(self) -> bool:
        """Every output read from the arena is bit for bit that of the normal run."""
        return all(self.bitwise(name) for name in self.normal)

    @property
    def ok(self) -> bool:
        """No tensor was corrupted and the outputs match a normal run bit for bit."""
        return not self.corruptions and self.outputs_match

    def output_lines(self) -> list[str]:
        """One line per graph output: its agreement with the normal run (the verdict)."""
        lines = []
        for name, normal in self.normal.items():
            what = f"{normal.dtype} {list(normal.shape)}"
            if self.bitwise(name):
                line = f"{name}: bit for bit equal to a normal run ({what})"
            elif self.outputs[name].shape != normal.shape:
                line = f"{name}: MISMATCH: shape {list(self.outputs[name].shape)}, a normal " \
                       f"run gives {list(normal.shape)}"
            else:
                differ = int(np.count_nonzero(~_same_elements(self.outputs[name], normal)))
                line = f"{name}: MISMATCH in {differ} of {normal.size} elements ({what})"
            lines.append(line)
        return lines

    def whole_model_lines(self) -> list[str]:
        """One line per graph output: the normal run beside one run of the whole model.

        Apart from the verdict: the normal run and the arena run are the same
        one-node sessions, compared bit for bit; the whole-model session
        prepacks weights and may fuse, so it rounds otherwise.
        """
        lines = []
        for name in self.normal:
            gap = self.largest_difference(name)
            if name in self.random:
                text = "not compared (computed from a random operator)"
            elif gap is None:
                text = "its shape or type differs from the normal run's"
            elif gap == 0:
                text = "bit for bit equal to the normal run" if \
                    self.normal[name].tobytes() == self.expected[name].tobytes() else \
                    "equal to the normal run (NaN payloads or signed zeros aside)"
            else:
                text = f"largest difference from the normal run {gap:.3g}" + (
                    "" if self.close(name) else f" (beyond rtol {self.rtol:g})")
            lines.append(f"{name}: {text}")
        return lines

    def __str__(self) -> str:
        head = (f"ok: arena {arena_text(self.arena_bytes)}, outputs match a normal run" if self.ok
                else "plan corrupts data:")
        lines = [str(c) for c in self.corruptions[:10]]
        if len(self.corruptions) > 10:
            lines.append(f"... and {len(self.corruptions) - 10} more corrupted reads")
        return "\n  ".join([head, *lines, *self.output_lines(),
                            *("whole model: " + line for line in self.whole_model_lines())])


def random_inputs(model: ModelProto, dims: Mapping[str, int] | None = None,
                  seed: int = 0) -> dict[str, np.ndarray]:
    """Random values for the graph inputs that are not initializers: floats normal, integers
    0 or 1 (an index, a mask, a token type valid in any model)."""
    rng = np.random.default_rng(seed)
    initializers = {t.name for t in model.graph.initializer}
    inputs = {}
    for value_info in model.graph.input:
        if value_info.name in initializers:
            continue
        shape = tensor_type(value_info.name, value_info.type, dims or {}).shape
        dtype = helper.tensor_dtype_to_np_dtype(value_info.type.tensor_type.elem_type)
        if np.issubdtype(dtype, np.floating):
            value = rng.standard_normal(shape)
        elif dtype == np.bool_:
            value = rng.random(shape) < 0.5
        else:  # 0 and 1: valid indices, masks and token types of any model
            value = rng.integers(0, 2, shape)
        inputs[value_info.name] = np.asarray(value, dtype)  # rank 0 stays an array
    return inputs


class ArenaRunner:
    """One model, its one-node sessions and its normal run, ready to check plans."""

    def __init__(self, model, *, dims: Mapping[str, int] | None = None,
                 inputs: Mapping[str, np.ndarray] | None = None, seed: int = 0,
                 backend: str = "onnxruntime"):
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
        if backend == "onnxruntime":
            require("onnxruntime", "prove", "running the model (--backend reference needs none)")
        proto, self.source = load_model(model)
        external = next(_external_tensors(proto.graph), None)
        if external is not None:
            raise ProblemError(f"tensor {external!r} keeps its values in external data, which "
                               f"memplan never opens; embed the weights to run the model",
                               file=self.source)
        self.model = bind_dims(proto, dict(dims or {}), self.source,
                               copy=isinstance(model, ModelProto))  # a file: parsed here
        self.backend = backend
        self.inputs = dict(inputs) if inputs is not None else \
            random_inputs(self.model, dims, seed)
        self.sessions: dict[int, object] = {}
        self.values = self._normal_run()
        self.expected = self._whole_model_run()

    # ------------------------------------------------------------ running nodes
    def _one_node_model(self, node: NodeProto, feeds: dict[str, np.ndarray]) -> ModelProto:
        inputs = [helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(v.dtype),
                                                v.shape) for name, v in feeds.items()]
        outputs = [onnx.ValueInfoProto(name=name) for name in node.output if name]
        graph = helper.make_graph([node], node.name or node.op_type, inputs, outputs)
        return helper.make_model(graph, opset_imports=self.model.opset_import,
                                 ir_version=self.model.ir_version,
                                 functions=self.model.functions)

    def _session(self, model: ModelProto):
        if self.backend == "reference":
            from onnx.reference import ReferenceEvaluator

            return ReferenceEvaluator(model)
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        options.log_severity_level = 3
        options.intra_op_num_threads = 1  # thread pools per one-node session cost more than
        options.inter_op_num_threads = 1  # they save, and keep the results deterministic
        return ort.InferenceSession(model.SerializeToString(), options,
                                    providers=["CPUExecutionProvider"])

    def _run_node(self, position: int, node: NodeProto, feeds: dict[str, np.ndarray],
                  key: object = None) -> dict[str, np.ndarray]:
        """``node``'s outputs on ``feeds``; one session per ``key`` (default: the position)."""
        key = position if key is None else key
        try:
            if key not in self.sessions:
                self.sessions[key] = self._session(self._one_node_model(node, feeds))
            results = self.sessions[key].run(None, feeds)
        except Exception as error:  # each backend has its own exception types
            first = next((line.strip() for line in str(error).splitlines() if line.strip()),
                         type(error).__name__)
            raise ProblemError(f"backend {self.backend} cannot run {_node_name(node, position)}: "
                               f"{first}", file=self.source) from None
        names = [name for name in node.output if name]
        return {name: np.asarray(value) for name, value in zip(names, results, strict=True)}

    def _normal_run(self) -> dict[str, np.ndarray]:
        values = {t.name: onnx.numpy_helper.to_array(t) for t in self.model.graph.initializer}
        values.update(self.inputs)
        for position, node in enumerate(self.model.graph.node):
            values.update(self._run_node(position, node,
                                         {name: values[name] for name in reads_of(node)}))
        return values

    def _whole_model_run(self) -> dict[str, np.ndarray]:
        try:
            session = self._session(self.model)
            results = session.run(None, self.inputs)
        except Exception as error:
            first = next((line.strip() for line in str(error).splitlines() if line.strip()),
                         type(error).__name__)
            raise ProblemError(f"backend {self.backend} cannot run the model: {first}",
                               file=self.source) from None
        names = [v.name for v in self.model.graph.output]
        return {name: np.asarray(value) for name, value in zip(names, results, strict=True)}

    def _random_outputs(self) -> set[str]:
        """Graph outputs computed from a random operator: not comparable between two runs."""
        tainted: set[str] = set()
        for node in self.model.graph.node:
            if _is_random(node) or tainted.intersection(reads_of(node)):
                tainted.update(name for name in node.output if name)
        return {v.name for v in self.model.graph.output} & tainted

    # ------------------------------------------------------------ the arena
    def check(self, problem: Problem, plan: Plan) -> ArenaReport:
        """Run the model inside ``plan``'s arena; see the module docstring."""
        arena = _Arena(problem, plan, f"backend {self.backend}", self.source)
        strangers = [name for name in arena.place if name not in self.values]
        if strangers:
            raise ProblemError(f"buffer {strangers[0]!r} is no tensor of this model: the "
                               f"problem does not describe it", file=self.source)
        for name, value in self.inputs.items():
            if value.size and name not in arena:
                raise ProblemError(f"graph input {name!r} is not a buffer of the problem: the "
                                   f"problem does not describe this model", file=self.source)
        for idx, kind in enumerate(problem.kinds):
            if kind in ("input", "weight"):
                arena.write(problem.ids[idx], self.values[problem.ids[idx]], "the caller")
        for position, node in enumerate(self.model.graph.node):
            where = f"node {node.name or '#' + str(position)} ({node.op_type})"
            reads = reads_of(node)
            in_arena = [name for name in reads if name in arena]
            if not in_arena and not any(name in arena for name in node.output):
                continue  # a weight: computed ahead of time, outside the arena
            feeds = {name: arena.read(name, where, self.values[name]) if name in arena
                     else self.values[name] for name in reads}
            if _is_random(node):  # the same random stream as the normal run: its values
                results = {name: self.values[name] for name in node.output if name}
            else:
                results = self._run_node(position, node, feeds)
            if _standard(node, ELEMENTWISE) and node.output[0] in arena:
                results[node.output[0]] = self._in_place(position, node, feeds,
                                                         results[node.output[0]], arena, where)
            for name, value in results.items():
                if name in arena:
                    arena.write(name, value, where)
                elif value.size and in_arena:
                    raise ProblemError(f"tensor {name!r} (written by {where} from arena "
                                       f"tensors) is not a buffer of the problem: the problem "
                                       f"does not describe this model", file=self.source)
        outputs = {name: arena.read(name, "the caller", self.values[name]) if name in arena
                   else self.values[name] for name in (v.name for v in self.model.graph.output)}
        return ArenaReport(outputs, {name: self.values[name] for name in outputs},
                           self.expected, arena.corruptions, arena.sizes,
                           random=self._random_outputs())

    def _in_place(self, position: int, node: NodeProto, feeds: dict[str, np.ndarray],
                  result: np.ndarray, arena: _Arena, where: str) -> np.ndarray:
        """What an element-by-element kernel writes when its output lies over its inputs.

        Such a kernel reads element ``b(i)`` of each input (``b``: broadcasting),
        then writes output element ``i``, for ``i = 0, 1, ...``. Where an input
        byte it reads was written by an earlier output element, it reads that
        instead. Output element ``i`` depends only on the elements before it, so
        rerunning the node on the inputs as seen (expanded to the output's
        shape) settles after at most as many rounds as the longest such chain.
        A `Corruption` is noted when the kernel's output differs from ``result``.
        """
        output = node.output[0]
        seen = arena.seen_by_kernel(output, result, {name: feeds[name] for name in feeds
                                                     if name in node.input
                                                     and _pointwise(node, feeds[name], result)})
        if seen is None:
            return result  # no input byte is overwritten before the kernel reads it
        current = result
        for _ in range(IN_PLACE_ROUNDS):
            expanded = {**feeds, **seen(current)}
            new = self._run_node(position, node, expanded, key=(position, "in place"))[output]
            settled = new.tobytes() == current.tobytes()
            current = new
            if settled:
                break
        differ = int(np.count_nonzero(~_same_elements(current, result)))
        if differ:
            arena.corruptions.append(Corruption(output, where, (), (
                f"written by {where} in place over its input: an element-by-element kernel "
                f"reads bytes it has already overwritten ({differ} of {result.size} elements "
                f"differ{'' if settled else f', still changing after {IN_PLACE_ROUNDS} rounds'})")))
        return current


class _Arena:
    """The byte arenas of one plan; who wrote what where, and which reads found other bytes."""

    def __init__(self, problem: Problem, plan: Plan, backend: str = "",
                 source: str | None = None):
        self.backend, self.source = backend, source  # for errors
        offsets = np.asarray(plan.offsets, np.int64)
        regions = np.zeros(len(problem), np.int64) if plan.regions is None else plan.regions
        tops = offsets + problem.sizes
        count = int(regions.max()) + 1 if len(problem) else 1
        self.sizes = [int(tops[regions == r].max(initial=0)) for r in range(count)]
        if len(problem) and int(offsets.min()) < 0:
            below = int(np.argmin(offsets))
            raise ProblemError(f"buffer {problem.ids[below]!r}: offset {int(offsets[below])} is "
                               "below 0: the plan has no arena to run in", file=source)
        if sum(self.sizes) > max(MAX_ARENA, 2 * int(problem.sizes.sum())):
            raise ProblemError(f"the plan's arena of {sum(self.sizes)} bytes is above "
                               f"{MAX_ARENA} and more than twice its buffers' bytes: not "
                               "allocated to run the model in it", file=source)
        self.bytes = [np.full(size, POISON, np.uint8) for size in self.sizes]
        self.place = {name: (int(regions[i]), int(offsets[i]), int(problem.sizes[i]))
                      for i, name in enumerate(problem.ids) if problem.kinds[i] != "scratch"}
        self.log: list[tuple[str, int, int, int]] = []  # (tensor, region, lo, hi) in order
        self.written: dict[str, tuple[int, bytes, np.dtype, tuple[int, ...]]] = {}
        self.corruptions: list[Corruption] = []

    def __contains__(self, name: str) -> bool:
        return name in self.place

    def seen_by_kernel(self, output: str, result: np.ndarray, inputs: dict[str, np.ndarray]):
        """How an element-by-element kernel writing ``output`` sees ``inputs``, or None.

        None when no input byte the kernel reads for element ``i`` was written
        by an output element before ``i``. Else a function: output values ->
        the inputs as the kernel reads them, expanded to the output's shape.
        O(elements x bytes per element) per input.
        """
        region, out_lo, out_size = self.place[output]
        width = result.dtype.itemsize
        count = result.size
        element = np.arange(count)[:, None]
        hazards = {}
        for name, value in inputs.items():
            if name == output or name not in self.place:
                continue
            other, lo, size = self.place[name]
            if other != region or lo >= out_lo + out_size or out_lo >= lo + size:
                continue  # no shared byte
            if lo == out_lo and value.shape == result.shape and value.itemsize == width:
                continue  # element i over element i: read just before it is written
            index = np.broadcast_to(np.arange(value.size).reshape(value.shape),
                                    result.shape).reshape(-1)
            where = lo + index[:, None] * value.itemsize + np.arange(value.itemsize)
            writer = np.where((where >= out_lo) & (where < out_lo + out_size),
                              (where - out_lo) // width, count)
            stale = writer < element  # written by an earlier element before this one reads it
            if stale.any():
                hazards[name] = (value, where, stale)
        if not hazards:
            return None
        base = self.bytes[region].copy()

        def seen(values: np.ndarray) -> dict[str, np.ndarray]:
            written = np.asarray(values, order="C").reshape(-1).view(np.uint8)
            expanded = {}
            for name, (value, where, stale) in hazards.items():
                raw = base[where]
                raw[stale] = written[where[stale] - out_lo]
                expanded[name] = raw.reshape(-1).view(value.dtype).reshape(result.shape)
            return expanded

        return seen

    def _bytes(self, name: str) -> np.ndarray:
        region, offset, size = self.place[name]
        return self.bytes[region][offset:offset + size]

    def write(self, name: str, value: np.ndarray, where: str) -> None:
        value = np.asarray(value, order="C")  # not ascontiguousarray: it makes rank 0 rank 1
        region, offset, size = self.place[name]
        if value.nbytes != size:
            raise ProblemError(f"tensor {name!r} (written by {where}, {self.backend}) has "
                               f"{value.nbytes} bytes ({value.dtype} {list(value.shape)}), the "
                               f"problem planned {size}", file=self.source)
        self._bytes(name)[:] = value.reshape(-1).view(np.uint8)
        digest = hashlib.blake2b(value.data, digest_size=16).digest()
        self.written[name] = (len(self.log), digest, value.dtype, value.shape)
        self.log.append((name, region, offset, offset + size))

    def read(self, name: str, reader: str, like: np.ndarray) -> np.ndarray:
        """The tensor as last written (or shaped ``like``), from its bytes.

        Notes a `Corruption` when the bytes changed since, or were never written.
        """
        raw = self._bytes(name).copy()
        if name not in self.written:
            self.corruptions.append(Corruption(name, reader, ()))
            return raw.view(like.dtype).reshape(like.shape)
        first, digest, dtype, shape = self.written[name]
        if hashlib.blake2b(raw.data, digest_size=16).digest() != digest:
            region, lo, hi = self.log[first][1:]
            culprits = (other for other, r, a, b in self.log[first + 1:]
                        if r == region and a < hi and lo < b and other != name)
            self.corruptions.append(Corruption(name, reader, tuple(dict.fromkeys(culprits))))
        return raw.view(dtype).reshape(shape)


def _node_name(node: NodeProto, position: int) -> str:
    return f"node {node.name or '#' + str(position)} ({node.op_type})"


def _standard(node: NodeProto, ops: frozenset[str]) -> bool:
    return node.domain in STANDARD_DOMAINS and node.op_type in ops


def _is_random(node: NodeProto) -> bool:
    """A random operator: two runs give other values (unless seeded the same way)."""
    return _standard(node, RANDOM_OPS) or (_standard(node, frozenset({"Dropout"}))
                                            and any(node.input[2:]))  # training_mode given


def _pointwise(node: NodeProto, value: np.ndarray, result: np.ndarray) -> bool:
    """Output element i reads ``value``'s element at i broadcast to the output's shape."""
    try:
        broadcast = np.broadcast_shapes(value.shape, result.shape) == result.shape
    except ValueError:
        return False
    return broadcast and (node.op_type != "BatchNormalization" or value.shape == result.shape)


def _same_elements(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per element: the same bytes (NaN payloads and signed zeros count)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return np.zeros(max(a.size, b.size), bool)
    width = max(a.dtype.itemsize, 1)
    bytes_a = np.asarray(a, order="C").reshape(-1).view(np.uint8).reshape(a.size, width)
    bytes_b = np.asarray(b, order="C").reshape(-1).view(np.uint8).reshape(b.size, width)
    return (bytes_a == bytes_b).all(axis=1)


def _external_tensors(graph: GraphProto) -> Iterator[str]:
    """Names of the tensors (initializers, attributes, in subgraphs too) in external data."""
    for tensor in graph.initializer:
        if tensor.data_location == TensorProto.EXTERNAL:
            yield tensor.name
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.t.data_location == TensorProto.EXTERNAL:
                yield attribute.t.name or node.name
        for body in subgraphs(node):
            yield from _external_tensors(body)


def check_plan_on_model(model, problem: Problem, plan: Plan, **runner_options) -> ArenaReport:
    """Run ``model`` inside ``plan``'s arena; options as `ArenaRunner` (dims, inputs, seed, ...)."""
    return ArenaRunner(model, **runner_options).check(problem, plan)
