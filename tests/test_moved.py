"""The old names of moved modules still import, for one release, each with one warning."""

from __future__ import annotations

import importlib
import re
import sys
import warnings
from pathlib import Path

import pytest

import memplan
from memplan.moved import MOVED, PACKAGES

ROOT = Path(memplan.__file__).parent


def _forget(monkeypatch, old: str) -> None:
    """``old`` and its old parents out of ``sys.modules`` (put back after the test), so that
    importing it goes through the finder again."""
    parts = old.split(".")
    for end in range(2, len(parts) + 1):
        monkeypatch.delitem(sys.modules, ".".join(parts[:end]), raising=False)


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_name_imports_the_new_module_with_one_warning(old, monkeypatch):
    _forget(monkeypatch, old)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = importlib.import_module(old)
    new = importlib.import_module(MOVED[old])
    said = [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)
            and str(w.message).startswith(f"{old} is now")]
    assert said == [f"{old} is now {MOVED[old]}; the old name goes in the next release"]
    assert new.__name__ == new.__spec__.name == MOVED[old]  # the new module keeps its name
    if old in PACKAGES:  # a stand-in: the moved module's names, the same objects
        public = [name for name in vars(new) if not name.startswith("_")]
        assert public and all(getattr(module, name) is getattr(new, name) for name in public)
    else:
        assert module is new


def test_an_old_package_imports_its_old_submodules(monkeypatch):
    for old in MOVED:
        _forget(monkeypatch, old)
    with pytest.warns(DeprecationWarning):
        from memplan.export import c_header, tflm  # a name of writers, then an old submodule
        from memplan.frontends import load, memplan_json
        from memplan.proofs import BACKENDS, prove

    assert (c_header, tflm, load, memplan_json, BACKENDS, prove) == (
        importlib.import_module("memplan.formats.writers").c_header,
        importlib.import_module("memplan.tflite.tflm"), memplan.formats.readers.load,
        memplan.formats.memplan_json, memplan.onnx.BACKENDS, memplan.onnx.prove)


def test_the_warning_points_at_the_import_statement(monkeypatch):
    _forget(monkeypatch, "memplan.operator_order")
    with pytest.warns(DeprecationWarning, match=r"^memplan\.operator_order is now") as caught:
        import memplan.operator_order  # noqa: F401
    assert [w.filename for w in caught] == [__file__]


def test_only_the_old_names_are_answered():
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("memplan.frontends.no_such_reader")
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("memplan.no_such_module")


def test_nothing_is_left_at_an_old_path():
    """An old name is the table's alone: no file or folder there shadows the finder (and a
    merge of an edit at the old path follows the move)."""
    left = [old for old in MOVED if (ROOT.parent / old.replace(".", "/")).with_suffix(".py")
            .exists() or (ROOT.parent / old.replace(".", "/") / "__init__.py").exists()]
    assert left == []
    assert all(re.fullmatch(r"memplan(\.\w+)+", name) for name in [*MOVED, *MOVED.values()])


def test_the_package_its_tests_and_docs_use_the_new_names():
    """Only this table and its test speak the old names (the changelog lists them): code
    merged from before the move is caught here, not by users' warnings."""
    names = sorted(MOVED, key=len, reverse=True)  # the longest first: the one that matches
    old = re.compile(r"(?<![\w.])(" + "|".join(map(re.escape, names)) + r")(?![\w])")
    paths = [ROOT.parent / "README.md", *(path for folder in ("memplan", "tests", "benchmarks",
                                                                "docs", "notebooks")
                                          for path in sorted((ROOT.parent / folder).rglob("*")))]
    speak = [f"{path.relative_to(ROOT.parent)}: {match[1]}" for path in paths
             if path.suffix in (".py", ".md", ".ipynb", ".c") and path.name != "changelog.md"
             and path not in (ROOT / "moved.py", Path(__file__))
             for match in old.finditer(path.read_text())]
    assert speak == []
