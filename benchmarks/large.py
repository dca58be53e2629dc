"""Seeded generators of large, realistic problems: transformer decoders and training steps.

The ``large`` and ``huge`` suites measure the planners at 1k to 1M buffers on problems
with the structure of real models rather than uniform random boxes:

- `transformer_decoder`: one decoder step of a large language model with its
  KV cache, as memplan's ONNX frontend reads it from the model `decoder_model`
  builds with `onnx.helper` (a user's exported model). The structure is written
  once (`_decoder`) for two writers: one builds the ONNX model, the other
  (`decoder_problem`) the frontend's `Problem` straight away, in O(n) without
  the model (1M buffers: 15 CPU-seconds and 1 GB, where the model and its
  reading took 19 minutes and 3.8 GB); the tests hold the two equal. Per layer::

      x -> LayerNorm -> Q, K, V projections -> per head: Slice q/k/v,
           Concat(past_k, k) / Concat(past_v, v) (the KV cache: graph inputs
           that live from step 0 until their layer reads them), Transpose,
           MatMul, Mul (scale), Add (mask), Softmax, MatMul -> Concat heads
        -> output projection -> Add (residual) -> LayerNorm -> MLP up
           and gate (SwiGLU: Sigmoid, Mul), or int8 up: QuantizeLinear /
           MatMulInteger / Cast / Mul) -> down -> Add

  float16 activations (int8 in the quantised MLPs), Reshape views (mandatory
  aliases) and element-wise operators (optional in-place aliases) as the
  frontend finds them. Heads are computed one by one, as graphs unrolled per
  head are (that is where the tensor count of a large model comes from);
- `training_step`: an unrolled training step: a forward pass whose
  activations each live until the backward operator that reads them, the
  backward pass in reverse with gradient tensors, per-layer weight gradients
  that live until the optimiser step at the end, and operator workspaces.

Sizes are chosen by the number of buffers wanted: the generator picks the
layer count (24-96 for decoders) and the head count to land near it. Same
arguments, same problem on every machine (Python's `random.Random`).
"""

from __future__ import annotations

import math
import random

import numpy as np

from memplan.bounds import live_bytes
from memplan.problem import Alias, Problem, Step

FLOAT16, INT8, INT32, INT64 = 10, 3, 6, 7  # onnx.TensorProto element types
_BYTES = {FLOAT16: 2, INT8: 1, INT32: 4, INT64: 8}
_INPLACE = frozenset({"Add", "Mul", "Sigmoid", "Cast"})  # the model's element-wise operators
_VIEWS = frozenset({"Reshape"})  # the model's views


def _decoder_shape(n_buffers: int) -> tuple[int, int]:
    """(layers, heads) whose decoder has about ``n_buffers`` tensors (~14 per head-layer)."""
    for layers in (24, 32, 48, 64, 80, 96):
        heads = round((n_buffers / layers - 24) / 14)
        if heads <= 64:
            return layers, max(2, heads)
    return 96, max(2, round((n_buffers / 96 - 24) / 14))


class _Writer:
    """Names tensors and nodes as the decoder is written: ``<prefix>_<counter>``, one
    counter for everything, so that both writers name every tensor alike."""

    def __init__(self):
        self.counter = 0

    def name(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}_{self.counter - 1}"


class _OnnxWriter(_Writer):
    """Writes the decoder as an ONNX ModelProto (`onnx.helper`)."""

    def __init__(self):
        super().__init__()
        from onnx import helper

        self.helper = helper
        self.nodes, self.inits, self.inputs, self.outputs = [], [], [], []

    def input(self, name: str, shape: tuple[int, ...]) -> str:
        self.inputs.append(self.helper.make_tensor_value_info(name, FLOAT16, list(shape)))
        return name

    def weight(self, shape, dtype: int = FLOAT16) -> str:
        """An initializer whose bytes are external (never read: only its shape matters)."""
        from onnx import TensorProto

        w = self.name("w")
        tensor = TensorProto(name=w, data_type=dtype, dims=list(shape))
        tensor.data_location = TensorProto.EXTERNAL
        entry = tensor.external_data.add()
        entry.key, entry.value = "location", "weights.bin"
        self.inits.append(tensor)
        return w

    def const(self, prefix: str, dtype: int, values, *, scalar: bool = False) -> str:
        c = self.name(prefix)
        dims = [] if scalar else [len(values)]
        self.nodes.append(self.helper.make_node("Constant", [], [c], value=self.helper.make_tensor(
            c, dtype, dims, list(values))))
        return c

    def node(self, op: str, ins, shape: tuple[int, ...], dtype: int = FLOAT16, **attrs) -> str:
        out = self.name(op.lower())
        self.nodes.append(self.helper.make_node(op, list(ins), [out], name=self.name(f"n_{op}"),
                                                **attrs))
        return out

    def finish(self, name: str, outputs: list[str]):
        graph = self.helper.make_graph(self.nodes, name, self.inputs,
                                       [self.helper.make_tensor_value_info(o, FLOAT16, None)
                                        for o in outputs], initializer=self.inits)
        model = self.helper.make_model(graph, opset_imports=[self.helper.make_opsetid("", 19)])
        model.ir_version = 9
        return model


class _ProblemWriter(_Writer):
    """Writes the decoder straight as the `Problem` memplan's ONNX frontend reads from it.

    The frontend's rules (`memplan.onnx.onnx`), as they apply to this model: constants
    are folded, every other node is one step; inputs live from step 0, a tensor from its
    step, both to one past their last reader, outputs to the horizon; the Reshape is a
    mandatory alias; an element-wise node gets an optional alias over its first input
    of its shape and type that dies at its step and is an activation outside the
    graph inputs' views; the live bytes per step are the widths. O(n) in lists: no
    model, no shape inference (a 1M-buffer decoder in seconds, not 20 minutes).
    """

    def __init__(self, alignment: int, name: str | None):
        super().__init__()
        self.alignment = alignment
        self.problem_name = name  # None: the graph's, as the frontend names it
        self.index: dict[str, int] = {}
        self.ids: list[str] = []
        self.types: list[tuple] = []  # (shape, element type) of each buffer
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.kinds: list[str] = []
        self.steps: list[Step] = []
        self.views: list[Alias] = []
        self.inplace: list[tuple[int, str, tuple[str, ...]]] = []  # (step, output, inputs)

    def _buffer(self, name: str, shape, dtype: int, start: int, kind: str) -> None:
        self.index[name] = len(self.ids)
        self.ids.append(name)
        self.types.append((shape, dtype))
        self.starts.append(start)
        self.ends.append(start + 1)
        self.kinds.append(kind)

    def input(self, name: str, shape: tuple[int, ...]) -> str:
        self._buffer(name, shape, FLOAT16, 0, "input")
        return name

    def weight(self, shape, dtype: int = FLOAT16) -> str:
        return self.name("w")

    def const(self, prefix: str, dtype: int, values, *, scalar: bool = False) -> str:
        return self.name(prefix)

    def node(self, op: str, ins, shape: tuple[int, ...], dtype: int = FLOAT16, **attrs) -> str:
        out = self.name(op.lower())
        step = len(self.steps)
        reads = tuple(dict.fromkeys(i for i in ins if i in self.index))
        for name in reads:
            i = self.index[name]
            self.ends[i] = max(self.ends[i], step + 1)
        self.steps.append(Step(self.name(f"n_{op}"), op, reads, (out,)))
        self._buffer(out, shape, dtype, step, "activation")
        if op in _VIEWS:
            self.views.append(Alias(ins[0], out))
        elif op in _INPLACE:
            self.inplace.append((step, out, reads))
        return out

    def _inplace(self) -> list[Alias]:
        """One optional alias per element-wise output, over its first input that dies."""
        index, ends, kinds, types = self.index, self.ends, self.kinds, self.types
        shared = {a.dst for a in self.views if kinds[index[a.src]] != "activation"}
        aliases = []
        for step, out, reads in self.inplace:
            for name in reads:
                i = index[name]
                if types[i] == types[index[out]] and ends[i] == step + 1 \
                        and kinds[i] == "activation" and name not in shared:
                    aliases.append(Alias(name, out, 0, optional=True))
                    break
        return aliases

    def finish(self, name: str, outputs: list[str]) -> Problem:
        horizon = max(1, len(self.steps))
        for out in outputs:
            self.ends[self.index[out]] = horizon
            self.kinds[self.index[out]] = "output"
        inputs = [i for i, kind in enumerate(self.kinds) if kind == "input"]
        order = inputs + sorted(set(range(len(self.ids))).difference(inputs))  # inputs first
        sizes = np.array([math.prod(shape) * _BYTES[dtype] for shape, dtype in self.types],
                         np.int64)[order]
        problem = Problem.from_arrays(sizes, np.array(self.starts)[order],
                                      np.array(self.ends)[order],
                                      ids=[self.ids[i] for i in order],
                                      alignments=np.full(len(sizes), self.alignment, np.int64),
                                      kinds=[self.kinds[i] for i in order],
                                      aliases=self.views + self._inplace(),
                                      steps=self.steps, name=self.problem_name or name)
        return problem.replace(widths=live_bytes(problem))


def _decoder(writer: _Writer, layers: int, heads: int, *, seq: int, past: int, head_dim: int,
             seed: int, int8_mlp: float):
    """One decoder step with a KV cache (see the module doc), written by ``writer``."""
    rng = random.Random(seed)
    hidden = heads * head_dim
    inner = 4 * hidden
    act, part = (1, seq, hidden), (1, seq, head_dim)
    cache, scores = (1, past + seq, head_dim), (1, seq, past + seq)
    node = writer.node
    x = writer.input("tokens_embedded", act)
    mask = writer.input("attention_mask", (1, 1, seq, past + seq))
    mask3 = node("Reshape", [mask, writer.const("c", INT64, [1, seq, past + seq])], scores)
    scale = writer.const("s", FLOAT16, [1.0 / head_dim ** 0.5], scalar=True)
    axes_last = writer.const("c", INT64, [2])
    outputs = []
    for layer in range(layers):
        ln1 = node("LayerNormalization", [x, writer.weight([hidden]), writer.weight([hidden])],
                   act, axis=-1)
        q = node("MatMul", [ln1, writer.weight([hidden, hidden])], act)
        k = node("MatMul", [ln1, writer.weight([hidden, hidden])], act)
        v = node("MatMul", [ln1, writer.weight([hidden, hidden])], act)
        head_outs = []
        for h in range(heads):
            lo = writer.const("c", INT64, [h * head_dim])
            hi = writer.const("c", INT64, [(h + 1) * head_dim])
            qh = node("Slice", [q, lo, hi, axes_last], part)
            kh = node("Slice", [k, lo, hi, axes_last], part)
            vh = node("Slice", [v, lo, hi, axes_last], part)
            past_k = writer.input(f"past_k_{layer}_{h}", (1, past, head_dim))
            past_v = writer.input(f"past_v_{layer}_{h}", (1, past, head_dim))
            k_all = node("Concat", [past_k, kh], cache, axis=1)
            v_all = node("Concat", [past_v, vh], cache, axis=1)
            outputs += [k_all, v_all]  # the updated cache: outputs, live to the end
            kt = node("Transpose", [k_all], (1, head_dim, past + seq), perm=[0, 2, 1])
            weights = node("MatMul", [qh, kt], scores)
            scaled = node("Mul", [weights, scale], scores)
            masked = node("Add", [scaled, mask3], scores)
            probs = node("Softmax", [masked], scores, axis=-1)
            head_outs.append(node("MatMul", [probs, v_all], part))
        attn = node("Concat", head_outs, act, axis=2)
        proj = node("MatMul", [attn, writer.weight([hidden, hidden])], act)
        x = node("Add", [x, proj], act)
        ln2 = node("LayerNormalization", [x, writer.weight([hidden]), writer.weight([hidden])],
                   act, axis=-1)
        wide = (1, seq, inner)
        if rng.random() < int8_mlp:  # int8 MLP: quantise, integer matmul, rescale
            zero = writer.const("zp", INT8, [0], scalar=True)
            q8 = node("QuantizeLinear", [ln2, writer.const("s", FLOAT16, [0.05], scalar=True),
                                         zero], act, INT8)
            acc = node("MatMulInteger", [q8, writer.weight([hidden, inner], INT8)], wide, INT32)
            up = node("Mul", [node("Cast", [acc], wide, to=FLOAT16),
                              writer.const("s", FLOAT16, [0.01], scalar=True)], wide)
        else:
            up = node("MatMul", [ln2, writer.weight([hidden, inner])], wide)
        gate = node("MatMul", [ln2, writer.weight([hidden, inner])], wide)
        silu = node("Mul", [gate, node("Sigmoid", [gate], wide)], wide)  # SwiGLU
        act_mlp = node("Mul", [silu, up], wide)
        down = node("MatMul", [act_mlp, writer.weight([inner, hidden])], act)
        x = node("Add", [x, down], act)
    final = node("LayerNormalization", [x, writer.weight([hidden]), writer.weight([hidden])],
                 act, axis=-1)
    return writer.finish(f"decoder-{layers}x{heads}", [final, *outputs])


def decoder_model(layers: int, heads: int, *, seq: int = 16, past: int = 512, head_dim: int = 64,
                  seed: int = 0, int8_mlp: float = 0.5):
    """The ONNX ModelProto of one decoder step with a KV cache (see the module doc)."""
    return _decoder(_OnnxWriter(), layers, heads, seq=seq, past=past, head_dim=head_dim,
                    seed=seed, int8_mlp=int8_mlp)


def decoder_problem(layers: int, heads: int, *, seq: int = 16, past: int = 512,
                    head_dim: int = 64, seed: int = 0, int8_mlp: float = 0.5,
                    alignment: int = 64, name: str | None = None) -> Problem:
    """``from_onnx(decoder_model(...), alignment=alignment, name=name)`` without the model
    (`_ProblemWriter`): O(n), 1M buffers in seconds."""
    return _decoder(_ProblemWriter(alignment, name), layers, heads, seq=seq, past=past,
                    head_dim=head_dim, seed=seed, int8_mlp=int8_mlp)


def transformer_decoder(n_buffers: int, seed: int = 0) -> Problem:
    """A decoder step (`decoder_model`) of about ``n_buffers`` buffers, as memplan reads it."""
    layers, heads = _decoder_shape(n_buffers)
    return decoder_problem(layers, heads, seed=seed, name=f"decoder-{layers}x{heads}-s{seed}")


def training_step(n_buffers: int, seed: int = 0, *, alignment: int = 64) -> Problem:
    """An unrolled training step of about ``n_buffers`` buffers (see the module doc).

    Steps: ``layers`` forward layers, each 3-6 operators writing an activation
    (kept until its backward operator reads it) and sometimes a workspace; then
    the backward operators in reverse: each reads its forward activation and
    the incoming gradient, writes the outgoing gradient (read by the next
    backward operator) and, for operators with weights, a weight gradient that
    lives until the optimiser step at the end. O(n).
    """
    rng = random.Random(seed)
    sizes: list[int] = []
    starts: list[int] = []
    ends: list[int] = []

    def buffer(size: int, start: int, end: int) -> int:
        sizes.append(size)
        starts.append(start)
        ends.append(end)
        return len(sizes) - 1

    batch_tokens = rng.choice((2048, 4096))
    hidden = rng.choice((512, 768, 1024))
    forward: list[tuple[int, int, bool]] = []  # (activation, its size, has weights)
    step = 0
    x = buffer(batch_tokens * hidden * 2, 0, 1)  # the input batch
    # about 2.9 buffers per forward operator: activation, gradient, weight grads, workspaces
    n_ops = max(4, int(n_buffers / 2.87))
    for _ in range(n_ops):
        width = hidden * rng.choice((1, 1, 1, 2, 4))
        dtype = rng.choice((2, 2, 4))
        out = buffer(batch_tokens * width * dtype, step, step + 1)
        ends[x] = max(ends[x], step + 1)
        if rng.random() < 0.15:
            buffer(max(256, batch_tokens * width // rng.choice((4, 8, 16))), step, step + 1)
        forward.append((x, sizes[x], rng.random() < 0.6))
        x = out
        step += 1
    loss_grad = buffer(sizes[x], step, step + 1)
    ends[x] = max(ends[x], step + 1)
    step += 1
    grad = loss_grad
    weight_grads = []
    for activation, size, has_weights in reversed(forward):
        ends[activation] = max(ends[activation], step + 1)  # saved for backward: read here
        ends[grad] = max(ends[grad], step + 1)
        grad = buffer(size, step, step + 1)
        if has_weights:
            weight_grads.append(buffer(hidden * hidden * rng.choice((2, 4)) // rng.choice(
                (1, 2, 4)), step, step + 1))
        if rng.random() < 0.1:
            buffer(max(256, size // rng.choice((2, 4, 8))), step, step + 1)
        step += 1
    optimiser = step + 1
    ends[grad] = max(ends[grad], optimiser)
    for g in weight_grads:
        ends[g] = optimiser
    count = len(sizes)
    return Problem.from_arrays(np.array(sizes, np.int64), np.array(starts, np.int64),
                               np.array(ends, np.int64),
                               alignments=np.full(count, alignment, np.int64),
                               name=f"training-{count}-s{seed}")
