"""The notebooks run from scratch, so that the committed ones never rot.

Each notebook is executed in a fresh kernel (nbclient), in the notebooks/
folder as a reader would run it; a cell that raises fails the test. Their
solver time limits are small (about a minute for both on two cores).
"""

from __future__ import annotations

import pytest

from .conftest import REPO

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOKS = REPO / "notebooks"


def execute(name: str):
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            cell.outputs = []  # from scratch: nothing of the committed run survives
    nbclient.NotebookClient(notebook, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
    return notebook


def outputs(notebook) -> str:
    """Everything the code cells printed or displayed as text."""
    texts = []
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            texts.append(output.get("text", "") or output.get("data", {}).get("text/plain", ""))
    return "\n".join(texts)


def pages(notebook) -> list[str]:
    """The HTML the code cells displayed (the interactive plan views among them)."""
    return [output["data"]["text/html"] for cell in notebook.cells
            for output in cell.get("outputs", []) if "text/html" in output.get("data", {})]


def images(notebook) -> int:
    return sum("image/png" in output.get("data", {})
               for cell in notebook.cells for output in cell.get("outputs", []))


def test_quickstart_runs():
    notebook = execute("quickstart.ipynb")
    text = outputs(notebook)
    assert "light_resnet50" in text and "exact planner" in text
    assert "overlap (r3, r6)" in text  # the broken plan is caught
    assert "peak: " in text and "'n12' (Conv)" in text  # why is the peak here
    assert "proven by CP-SAT, a minimal set" in text  # why 6 bytes cannot work
    assert "opens at step 65 'n89' (Conv)" in text  # the DenseNet gap
    assert images(notebook) == 5  # two layouts, memory over time, the peak, the gap
    assert "buffers                        177" in text  # counts shown whole, not 1.77e+02
    views = [page for page in pages(notebook) if "memplan-data" in page]
    assert len(views) == 1 and "<iframe srcdoc=" in views[0]  # DenseNet's two plans, inline


def test_optimal_vs_heuristic_runs():
    notebook = execute("optimal_vs_heuristic.ipynb")
    text = outputs(notebook)
    assert "20 problems" in text and "MiniMalloc fitted into 1 MiB" in text
    assert images(notebook) == 2  # the bar charts and the layouts side by side


def test_sweep_runs():
    pytest.importorskip("distributed")
    notebook = execute("sweep.ipynb")
    text = outputs(notebook)
    assert "216 of 216" in text and "validated   216 of 216 plans" in text
    assert "smallest tested capacity that fits every model: 32 MiB" in text
    assert "proven: needs >= 24.5 MiB" in text  # VGG-19 at 8 and 16 MiB, by the exact planner
    assert images(notebook) == 3  # arena vs batch, planners vs the optimum, capacities


def test_executorch_runs():
    pytest.importorskip("executorch")
    notebook = execute("executorch.ipynb")
    text = outputs(notebook)
    assert "greedy:  139,264 bytes" in text and "memplan: 114,688 bytes, optimal" in text
    assert text.count("violations: []") == 2  # both plans pass memplan's validator
    assert "bit-identical to greedy's program: True" in text
    assert "equal to eager PyTorch: True" in text
    assert images(notebook) == 2  # both layouts, memory over time


def test_tvm_runs():
    notebook = execute("tvm.ipynb")
    text = outputs(notebook)
    assert "violations: []" in text and "planned by Relax in" in text
    assert "VM: bit-identical in 3 call(s)" in text and ": planned" in text
    assert images(notebook) == 1  # the two layouts side by side
