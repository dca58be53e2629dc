"""memplan's Relax pipeline is the one ``tvm.compile`` runs for the target, plus one pass.

For each target (lowered only: no device, no toolkit), ``tvm.compile``'s own
Relax pipeline is caught where its output goes to the VM's code generator,
and compared structurally with memplan's pipeline run without memplan's
pass; memplan's pass sits right after ``StaticPlanBlockMemory``. On CPU the
generic pipeline keeps a side-effecting call whose result is unused, and the
outputs match ``tvm.compile``'s. Needs the ``tvm`` extra.
"""

from __future__ import annotations

import numpy as np
import pytest
import tvm
from tvm import relax
from tvm.script import ir as I
from tvm.script import relax as R

import memplan.tvm
from benchmarks import tvm_zoo as zoo

TARGETS = ["llvm", "cuda", "rocm", "vulkan", "opencl", "webgpu"]  # metal: TVM 0.27 crashes
# in its own Metal pipeline on this block (relax.get_default_pipeline alone)


class Lowered(Exception):
    """Raised where ``relax.build`` hands the lowered module to the VM's code generator."""


@pytest.fixture(scope="module")
def block():
    return zoo.export(zoo.block(lifted=True, d=64, seq=16))


def compiled_module(mod, target, monkeypatch):
    """The module ``tvm.compile(mod, target)`` lowers with its default Relax pipeline."""
    caught = []

    def catch(builder, lowered, exec_mode):
        caught.append(lowered)
        raise Lowered

    monkeypatch.setattr(relax.vm_build, "_vmcodegen", catch)
    with pytest.raises(Lowered):
        tvm.compile(mod, target=target)
    monkeypatch.undo()
    return caught[0]


@pytest.mark.parametrize("kind", TARGETS)
def test_pipeline_is_tvm_compile_own_with_memplan_pass_added(block, kind, monkeypatch):
    target = tvm.target.Target(kind)
    pipeline = memplan.tvm.pipeline(time_limit=5, target=target)
    passes = pipeline.passes(target)
    names = [p.info.name for p in passes]
    assert passes.index(pipeline.planning) == names.index("StaticPlanBlockMemory") + 1
    with target:
        lowered = tvm.transform.Sequential([p for p in passes if p is not pipeline.planning])(
            block)
    tvm.ir.assert_structural_equal(lowered, compiled_module(block, target, monkeypatch))


@tvm.register_global_func("memplan_test.add_one_in_place", override=True)
def add_one_in_place(x):
    x.copyfrom(x.numpy() + 1)
    return x


@I.ir_module
class SideEffect:
    @R.function
    def main(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        with R.dataflow():
            y = R.add(x, x)
            _ = R.call_pure_packed("memplan_test.add_one_in_place", y,
                                   ty_args=R.Tensor((4,), "float32"))
            z = R.multiply(y, y)
            R.output(z)
        return z


def test_side_effect_of_an_unused_call_is_kept_as_tvm_compile_keeps_it():
    x = np.arange(4, dtype="float32")
    outputs = []
    for pipeline in ("default", memplan.tvm.pipeline(time_limit=2)):
        machine = relax.VirtualMachine(tvm.compile(SideEffect, target="llvm",
                                                   relax_pipeline=pipeline), tvm.cpu())
        outputs.append(machine["main"](tvm.runtime.tensor(x)).numpy())
    assert outputs[0].tolist() == outputs[1].tolist() == (((2 * x) + 1) ** 2).tolist()
