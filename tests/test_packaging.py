"""What a user gets from the package: its version, its extras' hints, its kernels.

- one version: ``memplan.__version__``, which pyproject.toml reads and ``memplan
  --version`` prints;
- the core needs no optional dependency: without Dask, onnxruntime or matplotlib,
  what needs them fails with one line naming the extra to install (`MissingExtraError`);
- ``memplan info`` says whether the compiled kernels are loaded, and importing memplan
  without them warns once.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import memplan
from memplan.cli import main
from memplan.errors import MemplanError, MissingExtraError
from memplan.problem import Buffer, Problem

ROOT = Path(__file__).resolve().parents[1]
SQUEEZENET = ROOT / "memplan" / "data" / "squeezenet.onnx"


def test_one_version_read_by_the_build_and_printed_by_the_command(capsys):
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "memplan.__version__"}
    assert main(["--version"]) == 0  # main returns argparse's exit code
    assert capsys.readouterr().out.strip() == f"memplan {memplan.__version__}"


def test_the_core_dependencies_are_what_a_back_end_embeds():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = {d.split(">")[0].split("[")[0] for d in project["dependencies"]}
    assert core == {"numpy", "ortools", "onnx", "pandas", "rich"}
    extras = project["optional-dependencies"]
    assert any(d.startswith("dask[distributed]") for d in extras["sweep"])
    assert any(d.startswith("onnxruntime") for d in extras["prove"])
    assert any(d.startswith("matplotlib") for d in extras["plot"])
    assert any(d.startswith("dask[distributed]") for d in extras["dev"])  # the tests need it
    assert project["license"] == "Apache-2.0" and (ROOT / "LICENSE").is_file()


def test_a_missing_extra_is_one_line_with_its_install_command(monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed fails
    with pytest.raises(MissingExtraError, match=r"pip install 'memplan\[sweep\]'"):
        memplan.sweep([SQUEEZENET])
    assert main(["sweep", str(SQUEEZENET), "-o", str(tmp_path / "rows.csv")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install 'memplan[sweep]'" in err

    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    from onnx import TensorProto, helper

    from memplan.onnx.onnx_arena import ArenaRunner

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])
    relu = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                                               [x], [y]),
                             opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(MissingExtraError, match=r"pip install 'memplan\[prove\]'"):
        ArenaRunner(relu)
    ArenaRunner(relu, backend="reference")  # onnx's own runtime needs no extra

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    problem = Problem([Buffer("a", 4, 0, 1)])
    with pytest.raises(MissingExtraError, match=r"pip install 'memplan\[plot\]'"):
        memplan.plot_memory(problem, memplan.plan_with("naive", problem))
    assert issubclass(MissingExtraError, MemplanError) and issubclass(MissingExtraError,
                                                                      ImportError)


def test_info_says_whether_the_kernels_are_loaded(capsys):
    assert main(["info"]) == 0
    loaded = memplan.kernels()
    line = next(row for row in capsys.readouterr().out.splitlines() if row.startswith("kernels"))
    assert ("compiled" in line) == all(loaded.values())


def test_without_kernels_import_warns_once():
    """A process where the kernels cannot load (as after an install without a C compiler)."""
    blocked = ("import sys, warnings; warnings.simplefilter('always');"
               "sys.modules['memplan.solver._canonical_kernel'] = None;"
               "sys.modules['memplan.heuristics._placement_kernel'] = None;"
               "import memplan; import memplan.api; print(memplan.kernels())")
    done = subprocess.run([sys.executable, "-c", blocked], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("RuntimeWarning: memplan's compiled kernels are not loaded") == 1
    assert "'canonical': False" in done.stdout and "'placement': False" in done.stdout
