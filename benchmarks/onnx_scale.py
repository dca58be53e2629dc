"""Peak memory and seconds of ``memplan solve`` on ONNX models of 0.1 to 8 GB of weights.

    python -m benchmarks onnx-scale [--sizes 0.1,0.5,2,8] [--baseline DIR] [--folder /tmp]

Each model is a stack of transformer layers with random float32 weights,
built in code (`write_transformer`): LayerNormalization, one QKV MatMul
split by a constant, heads made with Reshape by constant shapes, attention,
an MLP, residual Adds. Models up to 0.5 GB keep their weights inline, larger
ones in one external-data file beside the model. Both are written in chunks,
so generating an 8 GB model never holds more than one chunk of weights.

Per model, ``memplan solve MODEL --time-limit T`` runs in its own process;
its peak resident memory (``ru_maxrss``, read by a small launcher process
whose only child it is) and wall seconds are measured. ``graph kB`` is the
size of the weightless graph (the model file without its tensors' data).
``--baseline DIR`` also runs the memplan found in DIR (a checkout of an
earlier version) on the inline models, side by side. The models are deleted
afterwards. Prints a markdown table.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper

from memplan.onnx.onnx_weightless import encode_varint

INLINE_UP_TO = 0.5e9  # bytes of weights a model keeps inline; larger ones use external data
CHUNK = 1 << 24  # float32 values generated and written at once (64 MB)
SEQUENCE = 128
WIDTHS = ((0.6e9, 1024), (float("inf"), 2048))  # (weights below, hidden width)


def layout(weight_bytes: float) -> tuple[int, int]:
    """``(width, layers)`` of a stack with about ``weight_bytes`` of weights (12 d^2 per layer)."""
    width = next(d for limit, d in WIDTHS if weight_bytes < limit)
    return width, max(1, round(weight_bytes / (12 * width * width * 4)))


def _transformer_graph(width: int, layers: int, heads: int = 16):
    """The graph (nodes, inputs, outputs) and its weights as ``(name, shape)``, in file order."""
    d, s, dh = width, SEQUENCE, width // heads
    weights: list[tuple[str, tuple[int, ...]]] = []
    nodes = []

    def weight(name, *shape):
        weights.append((name, shape))
        return name

    constants = [helper.make_tensor("heads", TensorProto.INT64, [4], [1, s, heads, dh]),
                 helper.make_tensor("model", TensorProto.INT64, [3], [1, s, d]),
                 helper.make_tensor("qkv_split", TensorProto.INT64, [3], [d, d, d]),
                 helper.make_tensor("scale", TensorProto.FLOAT, [], [dh ** -0.5])]

    def n(op, inputs, outputs=None, **attrs):
        outputs = outputs or [f"{op.lower()}{len(nodes)}"]
        nodes.append(helper.make_node(op, inputs, outputs, **attrs))
        return outputs[0] if len(outputs) == 1 else outputs

    x = "x"
    for i in range(layers):
        ln1 = n("LayerNormalization", [x, weight(f"l{i}.ln1.g", d), weight(f"l{i}.ln1.b", d)])
        qkv = n("Add", [n("MatMul", [ln1, weight(f"l{i}.qkv.w", d, 3 * d)]),
                        weight(f"l{i}.qkv.b", 3 * d)])
        q, k, v = n("Split", [qkv, "qkv_split"], [f"l{i}_q", f"l{i}_k", f"l{i}_v"], axis=-1)
        qh = n("Transpose", [n("Reshape", [q, "heads"])], perm=[0, 2, 1, 3])
        kh = n("Transpose", [n("Reshape", [k, "heads"])], perm=[0, 2, 3, 1])
        vh = n("Transpose", [n("Reshape", [v, "heads"])], perm=[0, 2, 1, 3])
        probs = n("Softmax", [n("Mul", [n("MatMul", [qh, kh]), "scale"])], axis=-1)
        context = n("Reshape", [n("Transpose", [n("MatMul", [probs, vh])], perm=[0, 2, 1, 3]),
                                "model"])
        attention = n("Add", [n("MatMul", [context, weight(f"l{i}.o.w", d, d)]),
                              weight(f"l{i}.o.b", d)])
        x2 = n("Add", [x, attention])
        ln2 = n("LayerNormalization", [x2, weight(f"l{i}.ln2.g", d), weight(f"l{i}.ln2.b", d)])
        up = n("Relu", [n("Add", [n("MatMul", [ln2, weight(f"l{i}.up.w", d, 4 * d)]),
                                  weight(f"l{i}.up.b", 4 * d)])])
        down = n("Add", [n("MatMul", [up, weight(f"l{i}.down.w", 4 * d, d)]),
                         weight(f"l{i}.down.b", d)])
        x = n("Add", [x2, down], [f"l{i}_out" if i < layers - 1 else "y"])
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, s, d])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, s, d])]
    return nodes, inputs, outputs, constants, weights


def _chunks(rng: np.random.Generator, shape: tuple[int, ...]):
    """The weight's float32 bytes, ``CHUNK`` values at a time."""
    left = int(np.prod(shape))
    while left:
        count = min(left, CHUNK)
        yield (rng.random(count, dtype=np.float32) - 0.5).tobytes()
        left -= count


def write_transformer(path: Path, width: int, layers: int, *, external: bool,
                      seed: int = 0) -> None:
    """Write the stack to ``path`` (weights inline, or in ``path.data`` beside it), in chunks.

    The graph is serialised with weightless initializers; each weight's
    ``raw_data`` (inline) or its bytes in the data file (external) are then
    written chunk by chunk, so memory stays at one chunk.
    """
    nodes, inputs, outputs, constants, weights = _transformer_graph(width, layers)
    rng = np.random.default_rng(seed)
    tensors, offset, data_name = [], 0, path.name + ".data"
    for name, shape in weights:
        tensor = TensorProto(name=name, dims=shape, data_type=TensorProto.FLOAT)
        size = int(np.prod(shape)) * 4
        if external:
            for key, value in (("location", data_name), ("offset", offset), ("length", size)):
                tensor.external_data.add(key=key, value=str(value))
            tensor.data_location = TensorProto.EXTERNAL
        tensors.append((tensor, shape, size))
        offset += size
    stored = [tensor for tensor, _, _ in tensors] if external else []
    graph = helper.make_graph(nodes, "transformer", inputs, outputs,
                              initializer=constants + stored)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    if external:
        path.write_bytes(model.SerializeToString())
        with open(path.parent / data_name, "wb") as data:
            for _, shape, _ in tensors:
                for chunk in _chunks(rng, shape):
                    data.write(chunk)
        return
    # inline: the graph field's length counts every initializer with its raw_data
    graph_bytes = model.graph.SerializeToString()  # without the large initializers
    model.ClearField("graph")
    entries = []
    for tensor, shape, size in tensors:
        header = tensor.SerializeToString() + encode_varint(9 << 3 | 2) + encode_varint(size)
        entries.append((encode_varint(5 << 3 | 2) + encode_varint(len(header) + size),
                        header, shape))
    total = len(graph_bytes) + sum(len(a) + len(b) + int(np.prod(s)) * 4 for a, b, s in entries)
    with open(path, "wb") as out:
        out.write(model.SerializeToString())
        out.write(encode_varint(7 << 3 | 2) + encode_varint(total) + graph_bytes)
        for prefix, header, shape in entries:
            out.write(prefix + header)
            for chunk in _chunks(rng, shape):
                out.write(chunk)


# A small process that runs the command and reports its child's peak: measuring the
# command as our own child would count this process's memory, which a fork copies.
_LAUNCH = """import resource, subprocess, sys, time
began = time.perf_counter()
status = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(peak, time.perf_counter() - began, status)"""


def measure(command: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """``(peak RSS in MB, wall seconds, exit code)`` of ``command`` in its own process."""
    done = subprocess.run([sys.executable, "-c", _LAUNCH, *command], env=env,
                          capture_output=True, text=True, check=True)
    peak, seconds, status = done.stdout.split()
    if int(status) != 0:
        print(f"  exit {status}: {done.stderr.strip()[-300:]}", file=sys.stderr)
    return int(peak) / 1024, float(seconds), int(status)


def _solve(code: Path, model: Path, time_limit: float) -> tuple[float, float, int]:
    env = dict(os.environ, PYTHONPATH=str(code))
    command = "import sys; from memplan.cli import main; sys.exit(main())"  # `memplan`
    return measure([sys.executable, "-P", "-c", command, "solve", str(model), "--time-limit",
                    str(time_limit)], env)


def graph_kilobytes(model: Path) -> float:
    """The weightless graph's serialised size."""
    from memplan.onnx.onnx_graph import load_graph

    return len(load_graph(model)[0].SerializeToString()) / 1e3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks onnx-scale",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="0.1,0.5,2,8", help="GB of weights, comma-separated")
    parser.add_argument("--baseline", type=Path, help="a checkout of an earlier memplan")
    parser.add_argument("--folder", type=Path, default=Path(tempfile.gettempdir()))
    parser.add_argument("--time-limit", type=float, default=5.0)
    args = parser.parse_args(argv)
    code = Path(__file__).resolve().parent.parent
    print("| weights GB | storage | layers x width | file GB | graph kB | code | peak RSS MB "
          "| seconds |\n| --- | --- | --- | --- | --- | --- | --- | --- |")
    for size in (float(text) for text in args.sizes.split(",")):
        folder = Path(tempfile.mkdtemp(prefix="onnx-scale-", dir=args.folder))
        try:
            width, layers = layout(size * 1e9)
            external = size * 1e9 > INLINE_UP_TO
            model = folder / f"transformer-{size:g}GB.onnx"
            write_transformer(model, width, layers, external=external)
            on_disk = sum(f.stat().st_size for f in folder.iterdir()) / 1e9
            runs = [("this", code)] + ([("baseline", args.baseline)]
                                       if args.baseline and not external else [])
            for label, where in runs:
                rss, seconds, status = _solve(where, model, args.time_limit)
                print(f"| {size:g} | {'external' if external else 'inline'} | "
                      f"{layers} x {width} | {on_disk:.2f} | {graph_kilobytes(model):.0f} | "
                      f"{label} | {rss:.0f}{'' if status == 0 else ' (failed)'} | "
                      f"{seconds:.1f} |", flush=True)
        finally:
            shutil.rmtree(folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
