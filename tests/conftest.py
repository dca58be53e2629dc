"""Shared test fixtures: where the shared benchmark data and the light ONNX models live."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
CHALLENGING = SHARED / "benchmarks" / "minimalloc-challenging"


def light_models_dir() -> Path:
    import onnx

    return Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


@pytest.fixture
def challenging() -> Path:
    """The folder of MiniMalloc's challenging problems (skips when ../shared is absent)."""
    if not CHALLENGING.is_dir():
        pytest.skip(f"shared benchmark data not found at {CHALLENGING}")
    return CHALLENGING
