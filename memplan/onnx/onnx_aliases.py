"""Which ONNX tensors may share bytes: views, Concat slices, and in-place operators.

An alias ``offset[dst] == offset[src] + delta`` lets two buffers overlap, and
the validator trusts it: buffers joined by honoured aliases may share bytes
whatever their lifetimes. So an alias offered wrongly corrupts data silently;
the rules below are deliberately narrow.

- **views** (mandatory, delta 0): Reshape, Flatten, Squeeze, Unsqueeze,
  Identity, and Dropout without a ``training_mode`` input: output 0 *is* its
  input 0 reinterpreted. Each buffer keeps its own lifetime, so the shared
  bytes stay reserved while any of them is live;
- **Concat in place** (mandatory, delta = the bytes before the slice):
  an input written by a step, read by nothing after the Concat, not a graph
  input or output, used once in the Concat and not aliased yet, of a
  byte-sized element type, when every dimension before the axis is 1 (so
  that the slices are contiguous) and the delta respects the alignment;
- **in place** (optional, delta 0): an element-wise operator's output over
  its first input of the same shape and element type (so element i of the
  output overwrites exactly element i of the input, which an element-by-
  element kernel has read just before: no broadcast input, no type change)
  whose *storage* dies at that step. The
  storage of a tensor is its group of mandatory aliases (a tensor and its
  views, a Concat and its slices): in place is offered only when no member of
  the group is read after the step or is a graph input, output or weight, and
  every member lies inside the input's bytes. A view still read later would
  otherwise see its data overwritten. One offer per output: two offers taken
  together would put two live inputs on the same bytes.

Cost: O(nodes + edges), plus one union-find over the mandatory aliases.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import replace

import numpy as np
from onnx import NodeProto

from memplan.onnx.onnx_graph import STANDARD_DOMAINS, Graph
from memplan.onnx.onnx_types import ELEMENT_BITS, TensorType
from memplan.problem import Alias, Buffer, Problem

VIEWS = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Dropout"})
ELEMENTWISE = frozenset({
    # unary
    "Abs", "Acos", "Acosh", "Asin", "Asinh", "Atan", "Atanh", "BitwiseNot", "Cast", "Ceil",
    "Celu", "Clip", "Cos", "Cosh", "Elu", "Erf", "Exp", "Floor", "Gelu", "HardSigmoid",
    "HardSwish", "LeakyRelu", "Log", "Mish", "Neg", "Not", "PRelu", "Reciprocal", "Relu",
    "Round", "Selu", "Shrink", "Sigmoid", "Sign", "Sin", "Sinh", "Softplus", "Softsign", "Sqrt",
    "Tan", "Tanh", "ThresholdedRelu", "BatchNormalization",
    # binary and variadic, with broadcasting (in place only over a full-size input)
    "Add", "And", "BitShift", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "Div", "Max", "Mean",
    "Min", "Mod", "Mul", "Or", "Pow", "Sub", "Sum", "Where", "Xor",
})


def _standard(node: NodeProto, ops: frozenset[str]) -> bool:
    return node.domain in STANDARD_DOMAINS and node.op_type in ops


class Aliasing:
    """Collects the aliases of one graph's buffers, rule by rule (views first)."""

    def __init__(self, graph: Graph, buffers: dict[str, Buffer],
                 type_of: Callable[[str], TensorType], alignment: int):
        self.graph = graph
        self.buffers = buffers
        self.type_of = type_of
        self.alignment = alignment
        self.aliases: list[Alias] = []

    def _pair(self, src: str, dst: str) -> bool:
        """Both tensors are buffers of the same size."""
        return (src in self.buffers and dst in self.buffers and src != dst
                and self.buffers[src].size == self.buffers[dst].size)

    def add_views(self) -> None:
        for node in self.graph.steps:
            if not _standard(node, VIEWS) or not node.input or not node.output:
                continue
            if node.op_type == "Dropout" and any(node.input[2:]):
                continue  # training_mode given: Dropout may zero elements
            if self._pair(node.input[0], node.output[0]):
                self.aliases.append(Alias(node.input[0], node.output[0]))

    def place_views_of_weights(self) -> None:
        """A view of a weight (``Reshape(W, Shape(x))``) lives where the weight lives."""
        for alias in self.aliases:  # views in node order: a view of a view follows its source
            source, view = self.buffers[alias.src], self.buffers[alias.dst]
            if source.regions != view.regions and "weights" in (source.regions or ()):
                self.buffers[alias.dst] = replace(view, regions=source.regions)

    def add_concats(self) -> None:
        aliased = {name for alias in self.aliases for name in (alias.src, alias.dst)}
        for step, node in enumerate(self.graph.steps):
            if not _standard(node, frozenset({"Concat"})) or node.output[0] not in self.buffers:
                continue
            output = node.output[0]
            shape = self.type_of(output).shape
            axis = next((a.i for a in node.attribute if a.name == "axis"), 1)
            axis = axis + len(shape) if axis < 0 else axis
            if math.prod(shape[:axis]) != 1 or ELEMENT_BITS[self.type_of(output).elem_type] % 8:
                continue  # slices not contiguous, or not byte-addressable
            uses = Counter(node.input)
            delta = 0
            for name in node.input:
                buffer = self.buffers.get(name)
                if (buffer is not None and buffer.kind == "activation"
                        and name in self.graph.producer and uses[name] == 1
                        and buffer.end == step + 1 and name not in aliased
                        and delta % self.alignment == 0):
                    self.aliases.append(Alias(output, name, delta))
                    aliased.update((name, output))  # no Concat of Concats: one level only
                delta += self.type_of(name).size

    def add_inplace(self) -> None:
        storage = _Storage(self.buffers, self.aliases)
        for step, node in enumerate(self.graph.steps):
            if not _standard(node, ELEMENTWISE) or any(node.output[1:]):
                continue
            output = node.output[0]
            for name in dict.fromkeys(node.input):
                if (self._pair(name, output) and self.type_of(name) == self.type_of(output)
                        and storage.dies_at(name, step, output)):
                    self.aliases.append(Alias(name, output, 0, optional=True))
                    break


class _Storage:
    """The mandatory alias groups: who shares bytes with whom, and until when."""

    def __init__(self, buffers: dict[str, Buffer], aliases: list[Alias]):
        rows = list(buffers.values())
        problem = Problem.from_arrays([b.size for b in rows], [b.start for b in rows],
                                      [b.end for b in rows], ids=[b.id for b in rows],
                                      aliases=aliases)
        self.index = {name: i for i, name in enumerate(problem.ids)}
        self.root, self.delta = problem.alias_groups
        self.sizes = problem.sizes
        self.end = np.zeros(len(rows), np.int64)  # per group root: when its bytes are free
        np.maximum.at(self.end, self.root, problem.ends)
        self.owned = np.zeros(len(rows), bool)  # per group root: the caller owns a member
        np.logical_or.at(self.owned, self.root, [b.kind != "activation" for b in rows])
        self.members: dict[int, list[int]] = {}
        for i, r in enumerate(self.root.tolist()):
            self.members.setdefault(r, []).append(i)

    def dies_at(self, name: str, step: int, output: str) -> bool:
        """Nothing sharing ``name``'s bytes is needed after ``step``, nor outside them."""
        i = self.index[name]
        r = int(self.root[i])
        if self.end[r] != step + 1 or self.owned[r] or r == self.root[self.index[output]]:
            return False
        low, high = self.delta[i], self.delta[i] + self.sizes[i]
        return all(low <= self.delta[m] and self.delta[m] + self.sizes[m] <= high
                   for m in self.members[r])
