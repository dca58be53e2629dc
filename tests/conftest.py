"""Test fixtures: where the benchmark data (in the repository) and the light ONNX models live."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CHALLENGING = REPO / "benchmarks" / "data" / "minimalloc"  # shipped with the repository


def light_models_dir() -> Path:
    import onnx

    return Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


@pytest.fixture
def challenging() -> Path:
    """The folder of MiniMalloc's challenging problems (benchmarks/data/minimalloc)."""
    return CHALLENGING


@pytest.fixture
def tricky(tmp_path) -> str:
    """A memplan JSON file of the small problem where greedy orders miss the optimum."""
    from memplan import Problem
    from memplan.formats import memplan_json

    from .test_api import TRICKY

    path = tmp_path / "tricky.json"
    memplan_json.write_problem(path, Problem(TRICKY, name="tricky"))
    return str(path)
