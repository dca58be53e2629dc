"""The seeds of `benchmarks.fuzz`: real files of every format memplan reads.

Tiny torch modules exported to ONNX and ``.pte``, a Keras model converted to
``.tflite``, a small Relax module printed as TVMScript, the bundled SqueezeNet,
ONNX's light models, MiniMalloc's CSV files and memplan JSON problems and plans.
`build_seeds` builds a reader's seeds once, in a child process (``python -m
benchmarks.fuzz_seeds READER FOLDER``): the fuzzing process imports neither
torch nor TVM nor TensorFlow.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
READERS = {"onnx": ".onnx", "pte": ".pte", "tvmscript": ".py", "tflite": ".tflite",
           "csv": ".csv", "json": ".json"}  # reader -> the suffix of its files


def _onnx_seeds(folder: Path) -> None:
    import onnx
    import torch

    class Tiny(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
            self.linear = torch.nn.Linear(64, 10)

        def forward(self, x):
            h = torch.relu(self.conv(x))
            return self.linear(h.reshape(1, -1)[:, :64]).softmax(-1)

    torch.manual_seed(0)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        torch.onnx.export(Tiny().eval(), (torch.randn(1, 3, 4, 4),), str(folder / "tiny.onnx"),
                          dynamo=False)
    shutil.copy(ROOT / "memplan" / "data" / "squeezenet.onnx", folder / "squeezenet.onnx")
    light = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
    for name in ("light_squeezenet.onnx", "light_bvlc_alexnet.onnx", "light_vgg19.onnx",
                 "light_inception_v1.onnx"):
        if (light / name).exists():
            shutil.copy(light / name, folder / name)


def _pte_seeds(folder: Path) -> None:
    from benchmarks.pte_models import export_pte

    (folder / "mlp.pte").write_bytes(export_pte("mlp"))


def _tvmscript_seeds(folder: Path) -> None:
    from benchmarks import tvm_zoo as zoo

    mod = zoo.export(zoo.Model("mlp", zoo.MLP((16, 32, 8)), (2, 16)))
    (folder / "mlp.py").write_text(mod.script())


def _tflite_seeds(folder: Path) -> None:
    from benchmarks.tflite_models import _keras, convert

    _, keras = _keras()
    keras.utils.set_random_seed(0)
    layers = keras.layers
    model = keras.Sequential([keras.Input((8, 8, 3), batch_size=1),
                              layers.Conv2D(4, 3, padding="same", activation="relu"),
                              layers.MaxPooling2D(), layers.Flatten(), layers.Dense(5)])
    (folder / "tiny.tflite").write_bytes(convert(model, "float32"))


def _csv_seeds(folder: Path) -> None:
    for path in sorted((ROOT / "benchmarks" / "data" / "minimalloc").glob("*.csv"))[:4]:
        shutil.copy(path, folder / path.name)
    (folder / "offsets.csv").write_text("id,lower,upper,size,offset\na,0,3,4,0\nb,3,9,4,0\n"
                                        "c,1,5,2,4\n")


def _json_seeds(folder: Path) -> None:
    from memplan import Alias, Buffer, Problem, Region, plan_with
    from memplan.formats import memplan_json

    problem = Problem([Buffer("a", 12, 0, 2), Buffer("b", 5, 0, 1, alignment=4),
                       Buffer("c", 6, 1, 3, regions=("fast", "slow")),
                       Buffer("d", 3, 2, 4, offset=32), Buffer("s", 4, 1, 2, kind="scratch",
                                                               max_size=16)],
                      aliases=[Alias("b", "a", 4), Alias("c", "d", 0, optional=True)],
                      conflicts=[("a", "d")], capacity=4096, name="seed",
                      regions=(Region("fast", 64), Region("slow", None, 1.0)))
    memplan_json.write_problem(folder / "problem.json", problem)
    plain = Problem([Buffer(f"t{i}", 8 * (i + 1), i % 3, i % 3 + 2) for i in range(6)],
                    name="plain")
    memplan_json.write_document(folder / "planned.json", {  # as solve -o writes it
        "problem": memplan_json.problem_to_dict(plain),
        "plan": memplan_json.plan_to_dict(plain, plan_with("greedy_by_size", plain))})


SEEDS = {"onnx": _onnx_seeds, "pte": _pte_seeds, "tvmscript": _tvmscript_seeds,
         "tflite": _tflite_seeds, "csv": _csv_seeds, "json": _json_seeds}


def build_seeds(reader: str, folder: Path) -> list[Path]:
    """``reader``'s seed files in ``folder`` (built once, in a child process: this one
    imports neither torch nor TVM nor TensorFlow)."""
    folder = Path(folder) / reader
    if not any(folder.glob(f"*{READERS[reader]}")):
        folder.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
            "TF_CPP_MIN_LOG_LEVEL": "3"}
        done = subprocess.run([sys.executable, "-m", "benchmarks.fuzz_seeds", reader,
                               str(folder)], cwd=ROOT, env=env, capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"building the {reader} seeds failed: {done.stderr[-2000:]}")
    return sorted(folder.glob(f"*{READERS[reader]}"))


if __name__ == "__main__":
    SEEDS[sys.argv[1]](Path(sys.argv[2]))
