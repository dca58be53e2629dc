"""ONNX models in, `Problem` out: every activation a buffer, views and in-place ops aliases.

Why a frontend of its own: a model's arena is decided by details that a plain
list of tensors misses. Weights are not activations (the light models of the
onnx package build theirs with ConstantOfShape, which would inflate the arena
many times); views share their input's bytes; an element-wise operator may
write over an input that dies at that step.

Steps (`from_onnx`):

- read the model without its weights' data (`onnx_weightless`: names,
  element types and dims of every tensor, and the values of the few integer
  constants shape inference reads), bind symbolic dimensions (``dims``),
  infer shapes (ONNX's inference; where it leaves a dimension unknown, its
  constant shape computations folded and onnxruntime's symbolic inference:
  `onnx_shapes`), and walk the
  nodes in order (`onnx_graph`); constant nodes
  are folded, every other node is one step. Memory does not grow with the
  weights;
- one buffer per runtime tensor of non-zero size (`onnx_types`), kind
  ``input`` (graph inputs, also when the graph returns them), ``output``
  (graph outputs) or ``activation``.
  Lifetimes are half-open: from the producing step (graph inputs: 0) to one
  past the last step that reads it (graph outputs: to the horizon, the
  number of steps). Zero-size tensors need no memory and are left out;
- weights are left out (``weights="exclude"``), or planned in a separate
  region ``"weights"``, alive the whole run (``weights="region"``); a view
  of a weight lives where its weight lives (region ``"weights"``);
- aliases (`onnx_aliases`, where the exact rules are): views (Reshape,
  Flatten, Squeeze, Unsqueeze, Identity, Dropout at inference) are
  mandatory aliases with delta 0; with ``concat_inplace``, a Concat input
  that dies at the Concat is a mandatory alias into its slice of the
  output; an element-wise operator gets an optional alias of its output
  over an input of the output's shape and element type whose bytes nobody
  needs afterwards;
- a control-flow node (If, Loop, Scan) reads the outer tensors its
  subgraphs capture, so they live across its step; its subgraphs' own
  tensors get one scratch buffer for that step, as large as all of them
  together (no reuse inside); a subgraph tensor of unknown size is refused;
- the live bytes per step become the problem's operator ``widths``, and
  each step's node name, op type and the buffers it reads and writes its
  ``steps`` metadata (producers and consumers, for `memplan.explain`).

Cost: O(nodes + edges) plus shape inference, and the alias groups' union-find.
Known limits: one schedule (the node order), no operator workspace besides
control flow, and in-place only for the operators listed in `ELEMENTWISE`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace

from onnx import ModelProto, NodeProto

from memplan.bounds import live_bytes
from memplan.errors import ProblemError
from memplan.limits import whole
from memplan.onnx.onnx_aliases import Aliasing
from memplan.onnx.onnx_graph import (
    Graph,
    analyze,
    bind_dims,
    defined_names,
    describe,
    load_graph,
    reads_of,
    subgraphs,
    value_types,
)
from memplan.onnx.onnx_options import OnnxOptions
from memplan.onnx.onnx_shapes import free_symbols, infer_shapes
from memplan.onnx.onnx_types import TensorType, tensor_type
from memplan.problem import Buffer, Problem, Region, Step


def from_onnx(model: str | os.PathLike | bytes | ModelProto, *,
              dims: Mapping[str, int] | None = None, alignment: int = 1, inplace: bool = True,
              concat_inplace: bool = False, weights: str = "exclude", strict: bool = True,
              name: str | None = None) -> Problem:
    """The memory-planning problem of an ONNX model (a file name, bytes or a ModelProto).

    Buffer ids are tensor names. Raises `ProblemError` naming the file and the
    tensor or node for anything it cannot plan exactly: an unknown size, a
    symbolic dimension missing from ``dims``, nodes out of topological order,
    a corrupted file. The options are those of `OnnxOptions`.
    """
    options = OnnxOptions(dims=dict(dims or {}), alignment=alignment, inplace=inplace,
                          concat_inplace=concat_inplace, weights=weights, strict=strict,
                          name=name)
    return _Builder(model, options).problem()


class _Builder:
    """One model's analysis, turned into buffers and aliases."""

    def __init__(self, model, options: OnnxOptions):
        proto, self.source = load_graph(model)
        self.options = options
        bound = bind_dims(proto, options.dims, self.source, copy=False)  # load_graph's copy
        analyze(bound, source=self.source)  # the structure first: its errors are the clearest
        inferred, self.shape_note = infer_shapes(bound, strict=options.strict,
                                                 source=self.source)
        self.graph: Graph = analyze(inferred, source=self.source)
        self.free = free_symbols(inferred.graph)
        if options.name:
            self.name = options.name
        elif self.source is not None:
            self.name = os.path.splitext(os.path.basename(self.source))[0]
        else:
            self.name = proto.graph.name or "model"
        self.activation_region = ("activations",) if options.weights == "region" else None
        self.tensor_types: dict[str, TensorType] = {}

    def type_of(self, name: str) -> TensorType:
        if name not in self.tensor_types:
            step = self.graph.producer.get(name)
            hint = "" if step is None else \
                f" (written by {describe(self.graph.steps[step], self.graph.positions[step])})"
            self.tensor_types[name] = tensor_type(name, self.graph.types.get(name),
                                                  self.options.dims, source=self.source,
                                                  hint=hint + self.shape_note, free=self.free)
        return self.tensor_types[name]

    def buffer(self, name: str, size: int, start: int, end: int, kind: str,
               regions: tuple[str, ...] | None = None) -> Buffer:
        whole(size, "size in bytes", file=self.source, buffer=name)  # before any sum of sizes
        return Buffer(name, size, start, end, self.options.alignment,
                      regions=regions or self.activation_region, kind=kind)

    def problem(self) -> Problem:
        graph, horizon = self.graph, self.graph.horizon
        outputs = {name for name in graph.outputs if name not in graph.constants}
        kinds = {name: "output" for name in outputs}
        kinds.update((name, "input") for name in graph.inputs)  # an input stays one when returned
        buffers: dict[str, Buffer] = {}
        for name in [*graph.inputs, *graph.producer]:
            size = self.type_of(name).size
            if size == 0:
                continue  # a zero-size tensor needs no memory
            start = graph.producer.get(name, 0)
            kind = kinds.get(name, "activation")
            end = horizon if name in outputs else max(graph.readers.get(name, [start])) + 1
            buffers[name] = self.buffer(name, size, start, end, kind)
        for step, node in enumerate(graph.steps):
            size = self._subgraph_bytes(node, step)
            if size:
                name = f"{node.name or node.op_type}#{step}/subgraphs"
                while name in buffers or name in graph.types:
                    name += "'"
                buffers[name] = self.buffer(name, size, step, step + 1, "scratch")
        regions: tuple[Region, ...] = ()
        if self.options.weights == "region":
            regions = (Region("activations"), Region("weights"))
            for name in graph.runtime_weights():
                size = self.type_of(name).size
                if size:
                    buffers[name] = self.buffer(name, size, 0, horizon, "weight", ("weights",))
        aliasing = Aliasing(graph, buffers, self.type_of, self.options.alignment)
        aliasing.add_views()
        if self.options.weights == "region":
            aliasing.place_views_of_weights()
        if self.options.concat_inplace:
            aliasing.add_concats()
        if self.options.inplace:
            aliasing.add_inplace()
        steps = [Step(node.name, node.op_type,
                      tuple(n for n in reads_of(node) if n in buffers),
                      tuple(n for n in node.output if n in buffers))
                 for node in graph.steps]
        for name, buffer in buffers.items():  # subgraph workspaces: written by their step
            if buffer.kind == "scratch":
                steps[buffer.start] = replace(steps[buffer.start],
                                              writes=(*steps[buffer.start].writes, name))
        problem = Problem(buffers.values(), aliases=aliasing.aliases, regions=regions,
                          name=self.name, source=self.source, steps=steps)
        return problem.replace(widths=live_bytes(problem))

    def _subgraph_bytes(self, node: NodeProto, step: int) -> int:
        """Bytes of all tensors of ``node``'s subgraphs (recursively) together."""
        total = 0
        pending = list(subgraphs(node))
        while pending:
            body = pending.pop()
            types = value_types(body)
            for name in sorted(defined_names(body)):
                try:
                    total += tensor_type(name, types.get(name), self.options.dims).size
                except ProblemError as error:
                    raise ProblemError(
                        f"{describe(node, self.graph.positions[step])}: subgraph "
                        f"{error.reason}; memplan plans a control-flow node only when all its "
                        f"subgraph tensors have known sizes", file=self.source) from None
            for inner in body.node:
                pending.extend(subgraphs(inner))
        return total
