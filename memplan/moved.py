"""The modules that moved, importable under their old names for one more release.

Readers, writers and proofs were grouped by role (``frontends/``, ``export/``,
``proofs/``); each compiler's now sit in one folder (`memplan.onnx`,
`memplan.tflite`, `memplan.executorch`, `memplan.tvm`), the files of no
compiler in `memplan.formats`, the operator-order search in `memplan.schedule`.
`MOVED` is the one table of old name -> new name. `install` puts a finder on
``sys.meta_path`` (``memplan/__init__.py`` does, at import) that answers only
the old names:

- an old module is the new module itself (``import memplan.frontends.onnx``
  gives `memplan.onnx.onnx`, the same object), with one `DeprecationWarning`
  naming the new name;
- an old package (``memplan.frontends``) is a stand-in whose names are those of
  the module its code moved to (``memplan.frontends.load`` is
  `memplan.formats.readers.load`), and under which the old submodules import.
"""

from __future__ import annotations

import importlib
import sys
import types
import warnings
from importlib.machinery import ModuleSpec

MOVED = {
    "memplan.frontends": "memplan.formats.readers",
    "memplan.frontends.memplan_json": "memplan.formats.memplan_json",
    "memplan.frontends.minimalloc_csv": "memplan.formats.minimalloc_csv",
    "memplan.frontends.onnx": "memplan.onnx.onnx",
    "memplan.frontends.onnx_aliases": "memplan.onnx.onnx_aliases",
    "memplan.frontends.onnx_batch": "memplan.onnx.onnx_batch",
    "memplan.frontends.onnx_graph": "memplan.onnx.onnx_graph",
    "memplan.frontends.onnx_options": "memplan.onnx.onnx_options",
    "memplan.frontends.onnx_shapes": "memplan.onnx.onnx_shapes",
    "memplan.frontends.onnx_types": "memplan.onnx.onnx_types",
    "memplan.frontends.onnx_vectors": "memplan.onnx.onnx_vectors",
    "memplan.frontends.onnx_weightless": "memplan.onnx.onnx_weightless",
    "memplan.frontends.tflite": "memplan.tflite.tflite",
    "memplan.frontends.executorch": "memplan.executorch.executorch",
    "memplan.frontends.executorch_chain": "memplan.executorch.executorch_chain",
    "memplan.frontends.executorch_pte": "memplan.executorch.executorch_pte",
    "memplan.frontends.executorch_specs": "memplan.executorch.executorch_specs",
    "memplan.frontends.pte_flatbuffer": "memplan.executorch.pte_flatbuffer",
    "memplan.frontends.pte_verify": "memplan.executorch.pte_verify",
    "memplan.frontends.relax": "memplan.tvm.relax",
    "memplan.frontends.relax_script": "memplan.tvm.relax_script",
    "memplan.frontends.relax_walk": "memplan.tvm.relax_walk",
    "memplan.export": "memplan.formats.writers",
    "memplan.export.c_header": "memplan.formats.c_header",
    "memplan.export.onnx_metadata": "memplan.onnx.onnx_metadata",
    "memplan.export.tflm": "memplan.tflite.tflm",
    "memplan.export.tflite_model": "memplan.tflite.tflite_model",
    "memplan.export.pte_program": "memplan.executorch.pte_program",
    "memplan.proofs": "memplan.onnx",
    "memplan.proofs.prove": "memplan.onnx.prove",
    "memplan.proofs.onnx_arena": "memplan.onnx.onnx_arena",
    "memplan.proofs.tflm_arena": "memplan.tflite.tflm_arena",
    "memplan.proofs.executorch_runtime": "memplan.executorch.executorch_runtime",
    "memplan.proofs.relax_vm": "memplan.tvm.relax_vm",
    "memplan.operator_order": "memplan.schedule.operator_order",
    "memplan.executorch.banks": "memplan.executorch.target_regions",
    "memplan.diagnosis.bank_curve": "memplan.diagnosis.region_curve",
}
PACKAGES = frozenset(old.rpartition(".")[0] for old in MOVED) & MOVED.keys()  # had submodules


class _OldPackage(types.ModuleType):
    """An old package: the names of the module its code moved to, and its old submodules."""

    def __getattr__(self, name: str):
        if name.startswith("__"):  # the import machinery's probes: this module's own
            raise AttributeError(name)
        return getattr(importlib.import_module(MOVED[self.__name__]), name)


class MovedFinder:
    """Finds and loads the old names of `MOVED`, and nothing else."""

    def __init__(self) -> None:
        self._specs: dict[str, ModuleSpec] = {}  # old name -> the new module's own spec

    def find_spec(self, name: str, path=None, target=None) -> ModuleSpec | None:
        if name not in MOVED:
            return None
        return ModuleSpec(name, self, is_package=name in PACKAGES)

    def create_module(self, spec: ModuleSpec) -> types.ModuleType:
        new = MOVED[spec.name]
        warnings.warn(f"{spec.name} is now {new}; the old name goes in the next release",
                      DeprecationWarning, stacklevel=2)  # the import statement (past importlib)
        if spec.name in PACKAGES:
            return _OldPackage(spec.name)
        module = importlib.import_module(new)
        self._specs[spec.name] = module.__spec__
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        """The new module runs once, under its own name; the import machinery has set its
        ``__spec__`` to the old name's, which is put back."""
        if module.__name__ != module.__spec__.name:
            module.__spec__ = self._specs.pop(module.__spec__.name)


def install() -> None:
    """The finder first on ``sys.meta_path`` (first: a folder of an old install left on
    disk would otherwise be found as a namespace package), once."""
    if not any(isinstance(finder, MovedFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, MovedFinder())
