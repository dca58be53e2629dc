"""CPU seconds and peak memory of reading ONNX models without their weights, beside onnx.load.

    python -m benchmarks onnx-reading [--repeat 3] [--folder /tmp]

Files built here (deleted afterwards): a small MLP; the MLP after 3M tiny
unknown top-level fields (9 MB); a tensor of 2M unpacked dims (4 MB); a chain
of 100k Relu nodes (no weights); a transformer stack of 0.1 GB of inline
weights (`onnx_scale.write_transformer`). Per file: the CPU seconds (user +
system, the least of ``--repeat`` runs, so that other load matters little) of
``onnx.load(path, load_external_data=False)`` and of memplan's reader
(`memplan.onnx.onnx_graph.load_graph`: the walk, the checks, protobuf's
parse, the shape constants), each in a process of its own after its imports;
and the reader's peak memory growth over the process's resident memory after
imports (Linux: the peak reset through ``/proc/self/clear_refs``, read as ``VmHWM``). The
target: at most twice onnx.load's seconds on a model without large tensors.
``--baseline DIR`` also times the memplan found in DIR (a checkout of an
earlier version), side by side. Prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from memplan.onnx.onnx_weightless import encode_varint

# Python run in a child after its imports: ``growth()`` is the peak memory since, in bytes.
PEAK = """
def status(key):  # kB
    return next(int(line.split()[1]) for line in open("/proc/self/status")
                if line.startswith(key + ":"))
with open("/proc/self/clear_refs", "w") as handle:
    handle.write("5")  # the peak (VmHWM) back to the memory now, past the imports' peak
before = status("VmRSS")
def growth():
    return (status("VmHWM") - before) * 1024
"""
MEASURE = """
import json, sys, time
mode, path, repeat = sys.argv[1], sys.argv[2], int(sys.argv[3])
if mode == "onnx":
    import onnx
    read = lambda: onnx.load(path, load_external_data=False)
else:
    from memplan.onnx.onnx_graph import load_graph
    read = lambda: load_graph(path)
""" + PEAK + """
best = float("inf")
for _ in range(repeat):
    start = time.process_time()
    try:
        read()
        outcome = "read"
    except Exception as error:
        outcome = type(error).__name__
    best = min(best, time.process_time() - start)
print(json.dumps({"seconds": best, "growth": growth(), "outcome": outcome}))
"""


def _field(number: int, wire: int, payload: bytes = b"") -> bytes:
    key = encode_varint(number << 3 | wire)
    return key + encode_varint(len(payload)) + payload if wire == 2 else key + payload


def _mlp() -> bytes:
    rng = np.random.default_rng(0)
    weights = [numpy_helper.from_array(rng.standard_normal(s).astype(np.float32), n)
               for n, s in (("W1", (64, 128)), ("W2", (128, 64)))]
    nodes = [helper.make_node("MatMul", ["x", "W1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("MatMul", ["r", "W2"], ["y"])]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [8, 64])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, None)], weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]
                             ).SerializeToString()


def _chain(nodes: int) -> bytes:
    made = [helper.make_node("Relu", [f"t{i}"], [f"t{i + 1}"], name=f"n{i}")
            for i in range(nodes)]
    graph = helper.make_graph(made, "chain", [helper.make_tensor_value_info(
        "t0", TensorProto.FLOAT, [2])], [helper.make_tensor_value_info(
            f"t{nodes}", TensorProto.FLOAT, [2])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]
                             ).SerializeToString()


def write_files(folder: Path) -> dict[str, Path]:
    from benchmarks.onnx_scale import layout, write_transformer

    files = {"mlp": _mlp(),
             "3M unknown fields + mlp": _field(100, 0, b"\x01") * 3_000_000 + _mlp(),
             "2M unpacked dims": _field(1, 0, encode_varint(8)) + _field(7, 2, _field(
                 5, 2, _field(1, 0, b"\x02") * 2_000_000 + _field(8, 2, b"W"))),
             "100k-node chain": _chain(100_000)}
    paths = {}
    for name, data in files.items():
        paths[name] = folder / f"{len(paths)}.onnx"
        paths[name].write_bytes(data)
    paths["0.1 GB inline weights"] = folder / "weights.onnx"
    write_transformer(paths["0.1 GB inline weights"], *layout(0.1e9), external=False)
    return paths


def measure(mode: str, path: Path, repeat: int, code: Path | None = None) -> dict:
    """One reader's figures on ``path``, in a process of its own (``code``: memplan's folder)."""
    env = {**os.environ, "PYTHONPATH": str(code)} if code else None
    run = subprocess.run([sys.executable, "-c", MEASURE, mode, str(path), str(repeat)],
                         capture_output=True, text=True, check=True, timeout=3600, env=env,
                         cwd=code)
    return json.loads(run.stdout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks onnx-reading",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3, help="runs per file; the least counts")
    parser.add_argument("--folder", type=Path, default=None, help="where the files go")
    parser.add_argument("--baseline", type=Path, default=None,
                        help="also time the memplan in this folder (an earlier checkout)")
    args = parser.parse_args(argv)
    folder = Path(tempfile.mkdtemp(dir=args.folder))
    try:
        extra = " baseline ms | baseline peak growth MB |" if args.baseline else ""
        print("| file | MB | onnx.load ms | memplan ms | ratio | memplan peak growth MB | "
              f"growth / file | memplan |{extra}")
        print("| --- " * (8 + 2 * bool(args.baseline)) + "|")
        for name, path in write_files(folder).items():
            size = path.stat().st_size
            reference, ours = measure("onnx", path, args.repeat), measure("memplan", path,
                                                                          args.repeat)
            row = (f"| {name} | {size / 1e6:.1f} | {reference['seconds'] * 1e3:.2f} | "
                   f"{ours['seconds'] * 1e3:.2f} | {ours['seconds'] / reference['seconds']:.2f}"
                   f" | {ours['growth'] / 1e6:.0f} | {ours['growth'] / size:.2f} | "
                   f"{ours['outcome']} |")
            if args.baseline:
                before = measure("memplan", path, args.repeat, args.baseline.resolve())
                row += f" {before['seconds'] * 1e3:.2f} | {before['growth'] / 1e6:.0f} |"
            print(row)
    finally:
        shutil.rmtree(folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
