"""Seeded generators of large, realistic problems: transformer decoders and training steps.

The ``large`` suite measures the planners at 1k to 100k buffers on problems
with the structure of real models rather than uniform random boxes:

- `transformer_decoder`: an ONNX model built with `onnx.helper`, one decoder
  step of a large language model with its KV cache, read by memplan's ONNX
  frontend exactly as a user's exported model would be. Per layer::

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

import random

import numpy as np

from memplan.problem import Problem

FLOAT16, INT8, INT32, FLOAT = 10, 3, 6, 1  # onnx.TensorProto element types


def _decoder_shape(n_buffers: int) -> tuple[int, int]:
    """(layers, heads) whose decoder has about ``n_buffers`` tensors (~14 per head-layer)."""
    for layers in (24, 32, 48, 64, 80, 96):
        heads = round((n_buffers / layers - 24) / 14)
        if heads <= 64:
            return layers, max(2, heads)
    return 96, max(2, round((n_buffers / 96 - 24) / 14))


def decoder_model(layers: int, heads: int, *, seq: int = 16, past: int = 512, head_dim: int = 64,
                  seed: int = 0, int8_mlp: float = 0.5):
    """The ONNX ModelProto of one decoder step with a KV cache (see the module doc)."""
    from onnx import TensorProto, helper

    rng = random.Random(seed)
    hidden = heads * head_dim
    nodes, inits, inputs = [], [], []
    counter = iter(range(10**9))

    def name(prefix: str) -> str:
        return f"{prefix}_{next(counter)}"

    def weight(shape, dtype=FLOAT16) -> str:
        """An initializer whose bytes are external (never read: only its shape matters)."""
        w = name("w")
        tensor = TensorProto(name=w, data_type=dtype, dims=list(shape))
        tensor.data_location = TensorProto.EXTERNAL
        entry = tensor.external_data.add()
        entry.key, entry.value = "location", "weights.bin"
        inits.append(tensor)
        return w

    def node(op: str, ins, n_out: int = 1, **attrs) -> list[str]:
        outs = [name(op.lower()) for _ in range(n_out)]
        nodes.append(helper.make_node(op, list(ins), outs, name=name(f"n_{op}"), **attrs))
        return outs

    def const_i64(values) -> str:
        c = name("c")
        nodes.append(helper.make_node("Constant", [], [c], value=helper.make_tensor(
            c, TensorProto.INT64, [len(values)], list(values))))
        return c

    def const_scalar(value: float, dtype=FLOAT16) -> str:
        c = name("s")
        nodes.append(helper.make_node("Constant", [], [c], value=helper.make_tensor(
            c, dtype, [], [value])))
        return c

    x_in = "tokens_embedded"
    inputs.append(helper.make_tensor_value_info(x_in, FLOAT16, [1, seq, hidden]))
    mask = "attention_mask"
    inputs.append(helper.make_tensor_value_info(mask, FLOAT16, [1, 1, seq, past + seq]))
    x = x_in
    mask3 = node("Reshape", [mask, const_i64([1, seq, past + seq])])[0]
    scale = const_scalar(1.0 / head_dim ** 0.5)
    axes_last = const_i64([2])
    outputs = []
    for layer in range(layers):
        ln1 = node("LayerNormalization", [x, weight([hidden]), weight([hidden])], axis=-1)[0]
        q = node("MatMul", [ln1, weight([hidden, hidden])])[0]
        k = node("MatMul", [ln1, weight([hidden, hidden])])[0]
        v = node("MatMul", [ln1, weight([hidden, hidden])])[0]
        head_outs = []
        for h in range(heads):
            lo, hi = const_i64([h * head_dim]), const_i64([(h + 1) * head_dim])
            qh = node("Slice", [q, lo, hi, axes_last])[0]
            kh = node("Slice", [k, lo, hi, axes_last])[0]
            vh = node("Slice", [v, lo, hi, axes_last])[0]
            past_k, past_v = f"past_k_{layer}_{h}", f"past_v_{layer}_{h}"
            for cache in (past_k, past_v):
                inputs.append(helper.make_tensor_value_info(cache, FLOAT16,
                                                            [1, past, head_dim]))
            k_all = node("Concat", [past_k, kh], axis=1)[0]
            v_all = node("Concat", [past_v, vh], axis=1)[0]
            outputs += [k_all, v_all]  # the updated cache: outputs, live to the end
            kt = node("Transpose", [k_all], perm=[0, 2, 1])[0]
            scores = node("MatMul", [qh, kt])[0]
            scaled = node("Mul", [scores, scale])[0]
            masked = node("Add", [scaled, mask3])[0]
            probs = node("Softmax", [masked], axis=-1)[0]
            head_outs.append(node("MatMul", [probs, v_all])[0])
        attn = node("Concat", head_outs, axis=2)[0]
        proj = node("MatMul", [attn, weight([hidden, hidden])])[0]
        x = node("Add", [x, proj])[0]
        ln2 = node("LayerNormalization", [x, weight([hidden]), weight([hidden])], axis=-1)[0]
        inner = 4 * hidden
        if rng.random() < int8_mlp:  # int8 MLP: quantise, integer matmul, rescale
            zero = name("zp")
            nodes.append(helper.make_node("Constant", [], [zero], value=helper.make_tensor(
                zero, INT8, [], [0])))
            q8 = node("QuantizeLinear", [ln2, const_scalar(0.05), zero])[0]
            acc = node("MatMulInteger", [q8, weight([hidden, inner], INT8)])[0]
            up = node("Mul", [node("Cast", [acc], to=FLOAT16)[0], const_scalar(0.01)])[0]
        else:
            up = node("MatMul", [ln2, weight([hidden, inner])])[0]
        gate = node("MatMul", [ln2, weight([hidden, inner])])[0]
        silu = node("Mul", [gate, node("Sigmoid", [gate])[0]])[0]  # SwiGLU
        act = node("Mul", [silu, up])[0]
        down = node("MatMul", [act, weight([inner, hidden])])[0]
        x = node("Add", [x, down])[0]
    final = node("LayerNormalization", [x, weight([hidden]), weight([hidden])], axis=-1)[0]
    outputs.insert(0, final)
    graph = helper.make_graph(nodes, f"decoder-{layers}x{heads}", inputs,
                              [helper.make_tensor_value_info(o, FLOAT16, None)
                               for o in outputs], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    model.ir_version = 9
    return model


def transformer_decoder(n_buffers: int, seed: int = 0) -> Problem:
    """A decoder step (`decoder_model`) of about ``n_buffers`` buffers, as memplan reads it."""
    from memplan.onnx.onnx import from_onnx

    layers, heads = _decoder_shape(n_buffers)
    model = decoder_model(layers, heads, seed=seed)
    return from_onnx(model, alignment=64, name=f"decoder-{layers}x{heads}-s{seed}")


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
