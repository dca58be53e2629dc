"""``python -m benchmarks.tflite_models``: memplan beside TFLite-Micro's own planner, in TFLM.

Builds small embedded models with tensorflow-cpu (Keras, ``weights=None``:
nothing is downloaded), converts each to ``.tflite`` as float32 and as int8
(post-training quantisation, random representative data, int8 input and
output), and for each model:

- reads it as TFLM plans it (`memplan.tflite.tflite`): tensors, planned
  buffers, memplan's lower bound;
- plans it with ``best`` (the fast heuristics) and with ``exact`` (CP-SAT,
  warm-started by ``best``, ``--time-limit`` seconds): arena, status, proven
  gap, seconds; both plans pass the validator;
- runs it in TFLM's interpreter with TFLM's greedy planner and with the
  exact plan written into the model (`memplan.tflite.tflm_arena.prove`): outputs
  bit-identical on random inputs, TFLM's reported head with each, and the
  smallest ``arena_size`` TFLM runs with under each (bisection).

The models (inputs small enough for a microcontroller, as in MLPerf Tiny):
``mobilenet_v1`` (Keras application, 128x128, alpha 0.25), ``mobilenet_v2``
(Keras application, 96x96, alpha 0.35), ``resnet50`` (Keras application, 64x64:
the smallest ResNet Keras ships, 25.6 M weights), ``resnet8`` (MLPerf Tiny image
classification, 32x32), ``ds_cnn`` (MLPerf Tiny keyword spotting, 49x10
MFCC), ``vww`` (MLPerf Tiny visual wake words: MobileNet v1 0.25, 96x96, two
classes), ``autoencoder`` (MLPerf Tiny anomaly detection, 640 inputs),
``unet`` (a small U-Net, 64x64, three levels, transposed convolutions up: Keras'
UpSampling2D converts to TILE, which TFLM lacks). All with batch 1. The ``.tflite`` files go to
``--out`` (default ``build/tflite_models``, not committed) and are reused
when present. ``tiny_cnn`` (12x12: convolutions, a residual add, a
transposed convolution) is the tests' model.

Each model is converted in a child process (``--convert NAME KIND``): with
tensorflow loaded in the same process, a later CP-SAT solve crashed (a
segmentation fault inside OR-Tools, seen in the test suite), so the process
that plans never imports tensorflow.

    python -m benchmarks.tflite_models --time-limit 30 --markdown table.md
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

MODELS = ("mobilenet_v1", "mobilenet_v2", "resnet50", "resnet8", "ds_cnn", "vww", "autoencoder",
          "unet")
KINDS = ("float32", "int8")


def _keras():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf

    return tf, tf.keras


def build_keras(name: str):
    """The Keras model ``name`` (random weights, seeded)."""
    tf, keras = _keras()
    keras.utils.set_random_seed(0)
    layers = keras.layers
    # batch 1 everywhere: static shapes, as on a microcontroller; the applications end in
    # logits (a softmax over random-weight logits overflows TFLM's int8 softmax parameters)
    if name == "mobilenet_v1":
        return keras.applications.MobileNet(
            input_tensor=keras.Input((128, 128, 3), batch_size=1), alpha=0.25, weights=None,
            classes=10, classifier_activation=None)
    if name == "mobilenet_v2":
        return keras.applications.MobileNetV2(
            input_tensor=keras.Input((96, 96, 3), batch_size=1), alpha=0.35, weights=None,
            classes=10, classifier_activation=None)
    if name == "resnet50":
        return keras.applications.ResNet50(
            input_tensor=keras.Input((64, 64, 3), batch_size=1), weights=None, classes=10,
            classifier_activation=None)
    if name == "vww":
        return keras.applications.MobileNet(
            input_tensor=keras.Input((96, 96, 3), batch_size=1), alpha=0.25, weights=None,
            classes=2, classifier_activation=None)
    if name == "resnet8":
        inputs = keras.Input((32, 32, 3), batch_size=1)
        x = layers.ReLU()(layers.BatchNormalization()(layers.Conv2D(16, 3, padding="same")(inputs)))
        for filters, stride in ((16, 1), (32, 2), (64, 2)):
            y = layers.Conv2D(filters, 3, strides=stride, padding="same")(x)
            y = layers.ReLU()(layers.BatchNormalization()(y))
            y = layers.BatchNormalization()(layers.Conv2D(filters, 3, padding="same")(y))
            if stride != 1:
                x = layers.Conv2D(filters, 1, strides=stride)(x)
            x = layers.ReLU()(layers.Add()([x, y]))
        x = layers.GlobalAveragePooling2D()(x)
        return keras.Model(inputs, layers.Dense(10, activation="softmax")(x), name=name)
    if name == "ds_cnn":
        inputs = keras.Input((49, 10, 1), batch_size=1)
        x = layers.Conv2D(64, (10, 4), strides=2, padding="same")(inputs)
        x = layers.ReLU()(layers.BatchNormalization()(x))
        for _ in range(4):
            x = layers.ReLU()(layers.BatchNormalization()(
                layers.DepthwiseConv2D(3, padding="same")(x)))
            x = layers.ReLU()(layers.BatchNormalization()(layers.Conv2D(64, 1)(x)))
        x = layers.AveragePooling2D(pool_size=(25, 5))(x)
        x = layers.Flatten()(x)
        return keras.Model(inputs, layers.Dense(12, activation="softmax")(x), name=name)
    if name == "autoencoder":
        inputs = keras.Input((640,), batch_size=1)
        x = inputs
        for units in (128, 128, 128, 128, 8, 128, 128, 128, 128):
            x = layers.ReLU()(layers.BatchNormalization()(layers.Dense(units)(x)))
        return keras.Model(inputs, layers.Dense(640)(x), name=name)
    if name == "tiny_cnn":
        inputs = keras.Input((12, 12, 3), batch_size=1)
        x = layers.Conv2D(8, 3, padding="same", activation="relu")(inputs)
        y = layers.DepthwiseConv2D(3, padding="same", activation="relu")(x)
        z = layers.Add()([x, layers.Conv2D(8, 1)(y)])
        z = layers.Conv2DTranspose(16, 2, strides=2, padding="same")(layers.MaxPooling2D()(z))
        outputs = layers.Dense(4, activation="softmax")(layers.Flatten()(z))
        return keras.Model(inputs, outputs, name=name)
    if name == "unet":
        inputs = keras.Input((64, 64, 1), batch_size=1)
        skips, x = [], inputs
        for filters in (8, 16, 32):
            x = layers.Conv2D(filters, 3, padding="same", activation="relu")(x)
            x = layers.Conv2D(filters, 3, padding="same", activation="relu")(x)
            skips.append(x)
            x = layers.MaxPooling2D()(x)
        x = layers.Conv2D(64, 3, padding="same", activation="relu")(x)
        for filters, skip in zip((32, 16, 8), reversed(skips), strict=True):
            x = layers.Conv2DTranspose(filters, 2, strides=2, padding="same")(x)
            x = layers.Concatenate()([x, skip])
            x = layers.Conv2D(filters, 3, padding="same", activation="relu")(x)
        return keras.Model(inputs, layers.Conv2D(1, 1, activation="sigmoid")(x), name=name)
    raise ValueError(f"unknown model {name!r}; models: {', '.join(MODELS)}")


def convert(model, kind: str, samples: int = 8) -> bytes:
    """The Keras model as ``.tflite`` bytes: float32, or int8 by post-training quantisation."""
    tf, _ = _keras()
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    if kind == "int8":
        rng = np.random.default_rng(0)
        shape = (1, *model.input_shape[1:])
        data = [[rng.random(shape, dtype=np.float32)] for _ in range(samples)]
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.representative_dataset = data.__iter__
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        converter.inference_input_type = converter.inference_output_type = tf.int8
    return converter.convert()


def model_file(out: Path, name: str, kind: str) -> Path:
    """The ``.tflite`` file of ``name`` in ``kind``, built and converted when missing (in a
    child process: this one never imports tensorflow)."""
    path = Path(out) / f"{name}_{kind}.tflite"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        done = subprocess.run([sys.executable, "-m", "benchmarks.tflite_models", "--convert",
                               name, kind, "--out", str(path.parent)],
                              cwd=Path(__file__).resolve().parents[1], capture_output=True,
                              text=True)
        if done.returncode or not path.exists():
            raise RuntimeError(f"converting {name} ({kind}) failed: {done.stderr[-2000:]}")
    return path


def measure(path: Path, time_limit: float, seed: int = 0) -> dict:
    """One model: memplan's best and exact plans, and both planners inside TFLM."""
    from memplan.registry import plan_with
    from memplan.tflite.tflite import from_tflite
    from memplan.tflite.tflm_arena import prove
    from memplan.validate import check

    problem = from_tflite(path)
    began = time.perf_counter()
    best = plan_with("best", problem, seed=seed)
    best_seconds = time.perf_counter() - began
    began = time.perf_counter()
    exact = plan_with("exact", problem, time_limit=time_limit, seed=seed, hint=best)
    exact_seconds = time.perf_counter() - began
    check(problem, best)
    check(problem, exact)
    began = time.perf_counter()
    report = prove(path, problem, exact, seed=seed)
    return {
        "model": path.stem, "tensors": report.tensors, "buffers": report.buffers,
        "lower_bound": int(exact.lower_bound), "tflm_head": report.tflm.head,
        "best": int(best.arena_size), "best_s": best_seconds,
        "exact": int(exact.arena_size), "exact_status": exact.status,
        "exact_bound": int(exact.best_bound), "exact_s": exact_seconds,
        "planned_head": report.planned.head, "head_matches": report.head_matches,
        "outputs_identical": not report.mismatches,
        "tflm_min_arena": report.min_arena, "memplan_min_arena": report.planned_min_arena,
        "tflm_tail": report.tflm.tail, "tflm_s": time.perf_counter() - began,
    }


COLUMNS = ("model", "tensors", "buffers", "TFLM head", "best", "exact (bound)", "saved",
           "TFLM min arena", "memplan min arena", "in TFLM", "best s", "exact s")


def row(m: dict) -> list[str]:
    bound = "optimal" if m["exact_status"] == "optimal" else \
        f"{m['exact_status']}, bound {m['exact_bound']}"
    saved = (m["tflm_head"] - m["exact"]) / m["tflm_head"] if m["tflm_head"] else 0.0
    proof = "identical" if m["outputs_identical"] else "OUTPUTS DIFFER"
    proof += ", head = arena" if m["head_matches"] else f", head {m['planned_head']}"
    return [m["model"], str(m["tensors"]), str(m["buffers"]), str(m["tflm_head"]),
            str(m["best"]), f"{m['exact']} ({bound})", f"{100 * saved:.1f}%",
            str(m["tflm_min_arena"]), str(m["memplan_min_arena"]), proof,
            f"{m['best_s']:.2f}", f"{m['exact_s']:.1f}"]


def markdown(results: list[dict]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "|".join("---" for _ in COLUMNS) + "|"]
    lines += ["| " + " | ".join(row(m)) + " |" for m in results]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.tflite_models",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(MODELS),
                        help=f"comma-separated, of {', '.join(MODELS)}")
    parser.add_argument("--kinds", default=",".join(KINDS), help="float32,int8")
    parser.add_argument("--out", type=Path, default=Path("build/tflite_models"),
                        help="where the .tflite files are built (and reused)")
    parser.add_argument("--time-limit", type=float, default=30,
                        help="seconds for the exact planner per model")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--markdown", type=Path, help="also write the table to this file")
    parser.add_argument("--convert", nargs=2, metavar=("NAME", "KIND"),
                        help="only build and convert one model into --out (what model_file "
                             "runs in a child process)")
    args = parser.parse_args(argv)
    if args.convert:
        name, kind = args.convert
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / f"{name}_{kind}.tflite").write_bytes(convert(build_keras(name), kind))
        return 0
    results = []
    for name in args.models.split(","):
        for kind in args.kinds.split(","):
            path = model_file(args.out, name, kind)
            results.append(measure(path, args.time_limit, args.seed))
            print(" | ".join(row(results[-1])), flush=True)
    table = markdown(results)
    print(table)
    if args.markdown:
        args.markdown.write_text(table + "\n")
    return 0 if all(m["outputs_identical"] for m in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
