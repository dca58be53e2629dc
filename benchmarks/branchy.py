"""Branchy ONNX models built with onnx.helper, for the operator-order search.

Five structures where the operator order decides the peak: an Inception-style
block stack, a DenseNet-style dense block, a U-Net with skip connections, a
transformer layer with parallel attention heads, and a two-tower model. Each
builder returns a checked `ModelProto` (float32, small random weights as
initializers, so that onnxruntime runs it in milliseconds); ``breadth_first``
lists the nodes in a breadth-first topological order (Kahn's algorithm with
a queue), as some exporters do, instead of the order they were built in.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


class _Builder:
    def __init__(self, seed: int = 0):
        self.nodes: list[onnx.NodeProto] = []
        self.weights: list[onnx.TensorProto] = []
        self.rng = np.random.default_rng(seed)
        self.count = 0

    def name(self, stem: str) -> str:
        self.count += 1
        return f"{stem}{self.count}"

    def weight(self, shape: tuple[int, ...]) -> str:
        name = self.name("w")
        fan_in = int(np.prod(shape[1:])) if len(shape) > 2 else shape[0]  # Conv or MatMul
        values = (self.rng.standard_normal(shape) / np.sqrt(fan_in)).astype(np.float32)
        self.weights.append(numpy_helper.from_array(values, name))
        return name

    def op(self, op_type: str, inputs: list[str], **attributes) -> str:
        out = self.name(op_type.lower())
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=out + "_node",
                                           **attributes))
        return out

    def conv(self, x: str, cin: int, cout: int, k: int = 1) -> str:
        y = self.op("Conv", [x, self.weight((cout, cin, k, k))], pads=[k // 2] * 4)
        return self.op("Relu", [y])

    def model(self, name: str, inputs: list[tuple[str, list[int]]],
              outputs: list[str]) -> onnx.ModelProto:
        graph = helper.make_graph(
            self.nodes, name,
            [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
            [helper.make_empty_tensor_value_info(o) for o in outputs], initializer=self.weights)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
        types = {v.name: v.type for v in inferred.graph.value_info}
        for output in model.graph.output:
            output.type.CopyFrom(types[output.name])
        onnx.checker.check_model(model, full_check=True)
        return model


def inception(blocks: int = 3, channels: int = 16, side: int = 16) -> onnx.ModelProto:
    """Blocks of four branches (1x1; 1x1-3x3; 1x1-5x5; pool-1x1) joined by a Concat."""
    b = _Builder()
    x, c = "x", channels
    for _ in range(blocks):
        one = b.conv(x, c, c // 2)
        three = b.conv(b.conv(x, c, c), c, c // 2, 3)
        five = b.conv(b.conv(x, c, c), c, c // 4, 5)
        pool = b.conv(b.op("MaxPool", [x], kernel_shape=[3, 3], pads=[1, 1, 1, 1]), c, c // 4)
        x = b.op("Concat", [one, three, five, pool], axis=1)
        c = c // 2 + c // 2 + c // 4 + c // 4
    return b.model("inception", [("x", [1, channels, side, side])], [x])


def dense_block(layers: int = 6, growth: int = 8, channels: int = 16,
                side: int = 16) -> onnx.ModelProto:
    """Each layer reads the Concat of every earlier output (a 1x1 bottleneck, then 3x3)."""
    b = _Builder()
    features, c = ["x"], channels
    for _ in range(layers):
        joined = features[0] if len(features) == 1 else b.op("Concat", features, axis=1)
        features.append(b.conv(b.conv(joined, c, 4 * growth), 4 * growth, growth, 3))
        c += growth
    return b.model("dense_block", [("x", [1, channels, side, side])],
                   [b.op("Concat", features, axis=1)])


def unet(depth: int = 3, channels: int = 8, side: int = 32) -> onnx.ModelProto:
    """Encoder convs with max pooling, a decoder that upsamples and concatenates the skips."""
    b = _Builder()
    x, c, skips = "x", channels, []
    for level in range(depth):
        x = b.conv(b.conv(x, c if level else channels, 2 * c, 3), 2 * c, 2 * c, 3)
        skips.append((x, 2 * c))
        x = b.op("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])
        c *= 2
    x = b.conv(x, c, c, 3)
    scales = b.name("scales")
    b.weights.append(numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), scales))
    for skip, skip_c in reversed(skips):
        up = b.op("Resize", [x, "", scales], mode="nearest")
        x = b.conv(b.op("Concat", [up, skip], axis=1), c + skip_c, skip_c // 2, 3)
        c = skip_c // 2
    return b.model("unet", [("x", [1, channels, side, side])], [x])


def attention(heads: int = 4, tokens: int = 64, width: int = 64) -> onnx.ModelProto:
    """One transformer layer: per-head Q, K, V, softmax(QK^T)V, Concat, projection, residual."""
    b = _Builder()
    dim = width // heads
    outs = []
    for _ in range(heads):
        q = b.op("MatMul", ["x", b.weight((width, dim))])
        k = b.op("MatMul", ["x", b.weight((width, dim))])
        v = b.op("MatMul", ["x", b.weight((width, dim))])
        scores = b.op("Softmax", [b.op("MatMul", [q, b.op("Transpose", [k], perm=[1, 0])])],
                      axis=-1)
        outs.append(b.op("MatMul", [scores, v]))
    joined = b.op("Concat", outs, axis=1)
    y = b.op("Add", ["x", b.op("MatMul", [joined, b.weight((width, width))])])
    hidden = b.op("Relu", [b.op("MatMul", [y, b.weight((width, 4 * width))])])
    return b.model("attention", [("x", [tokens, width])],
                   [b.op("Add", [y, b.op("MatMul", [hidden, b.weight((4 * width, width))])])])


def two_tower(layers: int = 4, width: int = 256, batch: int = 32) -> onnx.ModelProto:
    """Two MLP towers on two inputs, widening then narrowing, joined at the end."""
    b = _Builder()
    ends = []
    for tower in ("a", "b"):
        x, w = tower, width
        for level in range(layers):
            grow = 2 if level < layers // 2 else 1 / 2
            x = b.op("Relu", [b.op("MatMul", [x, b.weight((w, int(w * grow)))])])
            w = int(w * grow)
        ends.append(x)
    return b.model("two_tower", [("a", [batch, width]), ("b", [batch, width])],
                   [b.op("Concat", ends, axis=1)])


MODELS: dict[str, Callable[[], onnx.ModelProto]] = {
    "inception": inception, "dense_block": dense_block, "unet": unet,
    "attention": attention, "two_tower": two_tower,
}


def breadth_first(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with its nodes in breadth-first topological order (Kahn, FIFO queue)."""
    nodes = list(model.graph.node)
    writer = {out: i for i, node in enumerate(nodes) for out in node.output}
    preds = [{writer[x] for x in node.input if x in writer} for node in nodes]
    succs: list[list[int]] = [[] for _ in nodes]
    for i, before in enumerate(preds):
        for p in sorted(before):
            succs[p].append(i)
    missing = [len(p) for p in preds]
    queue = deque(i for i in range(len(nodes)) if not missing[i])
    order = []
    while queue:
        i = queue.popleft()
        order.append(i)
        for s in succs[i]:
            missing[s] -= 1
            if not missing[s]:
                queue.append(s)
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    del copy.graph.node[:]
    copy.graph.node.extend(nodes[i] for i in order)
    return copy
