"""memplan inside Apache TVM: the Relax frontend, the pass, the pipeline and the VM proof.

Small models built with ``tvm.relax.frontend.nn`` are exported once (module
fixtures; the decoder's kernels scheduled for CPU), built with Relax's default
pipeline and with memplan's, and run in ``relax.VirtualMachine``: outputs
bit-identical, every plan validated, memplan's bytes never above Relax's.
Refusals name the function and binding; a plan with two live tensors on the
same bytes is caught; GPU targets are lowered only (no GPU needed). Needs the
``tvm`` extra.
"""

from __future__ import annotations

import subprocess
import sys
import warnings

import pytest
import tvm
from tvm import relax
from tvm.relax.frontend import nn
from tvm.s_tir import dlight

import memplan
import memplan.tvm
from benchmarks import tvm_zoo as zoo
from memplan import InvalidPlanError, ProblemError
from memplan.cli import main
from memplan.plan import Plan
from memplan.tvm.relax import (
    default_passes,
    lower_to_planned,
    relax_functions,
    relax_layouts,
)
from memplan.tvm.relax_vm import prove_relax
from memplan.tvm.rewrite import rewrite_function
from memplan.validate import check

TARGET = tvm.target.Target("llvm")


class Mixed(nn.Module):
    """float32 and float16 tensors in one arena."""

    def __init__(self):
        self.a, self.b = nn.Linear(32, 64), nn.Linear(64, 16)

    def forward(self, x):
        h = nn.op.astype(nn.op.relu(self.a(x)), "float16")
        h = nn.op.astype(nn.op.silu(h) * h, "float32")
        return self.b(h)


MODELS = {
    "mlp": lambda: zoo.Model("mlp", zoo.MLP((64, 128, 128, 10)), (4, 64)),
    "cnn": lambda: zoo.Model("cnn", zoo.CNN((3, 8, 8, 16)), (1, 3, 16, 16)),
    "block": lambda: zoo.block(lifted=True, d=64, seq=16),
    "decoder": lambda: zoo.llama(layers=1, d=64, heads=4, kv_heads=2, ffn=128, vocab=100,
                                 seq=32, scheduled=True),  # as the d-2048 benchmark runs
    "mixed": lambda: zoo.Model("mixed", Mixed(), (4, 32)),
}


@pytest.fixture(scope="module", params=sorted(MODELS))
def proven(request):
    """(name, module, proof) per model: built both ways and run in the VM."""
    mod = zoo.export(MODELS[request.param]())
    return request.param, mod, prove_relax(mod, time_limit=5, lengths=(1, 5, 32))


@pytest.fixture(scope="module")
def mlp():
    return zoo.export(MODELS["mlp"]())


@pytest.fixture(scope="module")
def block():
    return zoo.export(MODELS["block"]())


def test_importing_memplan_leaves_tvm_out():
    code = "import sys, memplan; assert 'tvm' not in sys.modules, 'tvm imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_outputs_bit_identical_and_every_plan_valid(proven):
    name, mod, proof = proven
    assert proof.ok, proof.lines()
    assert proof.reports, name
    for report in proof.reports:
        assert report.memplan_bytes <= report.relax_bytes
        assert report.bound <= report.memplan_bytes
        check(report.problem, report.plan)
        assert report.plan.arena_size == report.bound or report.status == "optimal"


def test_frontend_reads_what_relax_planned(mlp):
    """The MLP: four intermediates and a transposed weight, as `alloc_tensor`s in three
    storages; the kernels name the steps; the output stays Relax's."""
    problem = memplan.from_relax(mlp)
    planned = lower_to_planned(mlp)
    layout = relax_layouts(planned, "forward")[0]
    assert layout.problem.ids == problem.ids
    assert len(problem) == 5 and all(problem.alignments == 64)
    assert [s.name for s in problem.steps][:2] == ["transpose", "fused_matmul_add_relu"]
    assert {s.op for s in problem.steps} == {"call_tir"}
    assert problem.steps[1].reads == (problem.ids[0],)
    # sizes from shapes and dtypes: the first weight transposed, 64 x 128 float32
    assert problem.sizes[0] == 64 * 128 * 4
    assert layout.relax_bytes >= memplan.lower_bound(problem)
    passes = default_passes(TARGET)  # lowered up to Relax's planner: planned on reading
    cut = [p.info.name for p in passes].index("StaticPlanBlockMemory")
    with TARGET:
        before = tvm.transform.Sequential(passes[:cut])(mlp)
    assert memplan.from_relax(before).ids == problem.ids
    check(problem, Plan.from_offsets(problem, [layout.relax_offsets[i] for i in problem.ids],
                                     planner="relax"))


def test_symbolic_dimensions_at_their_upper_bound():
    mod = zoo.export(MODELS["decoder"]())
    problem = memplan.from_relax(mod)
    # the logits, 32 tokens x 100 entries of float32, are the output: not planned; the
    # attention scores (heads x seq x seq) are, at seq = 32
    assert 4 * 32 * 32 * 4 in problem.sizes.tolist()
    unbounded = mod.clone() if hasattr(mod, "clone") else mod
    unbounded["forward"] = mod["forward"].without_attr("tir_var_upper_bound")
    assert len(memplan.from_relax(unbounded)) < len(problem)  # symbolic storages: Relax's


def test_tvmscript_file_reads_as_the_module(mlp, tmp_path):
    path = tmp_path / "mlp.py"
    path.write_text(mlp.script())
    direct, loaded = memplan.from_relax(mlp), memplan.load(path)
    assert loaded.ids == direct.ids and loaded.sizes.tolist() == direct.sizes.tolist()
    assert loaded.starts.tolist() == direct.starts.tolist()
    (tmp_path / "bad.py").write_text("x = 1\n")
    with pytest.raises(ProblemError, match="bad.py"):
        memplan.load(tmp_path / "bad.py")


def test_pipeline_in_a_target_scope_and_its_report(block, mlp):
    pipeline = memplan.tvm.pipeline(time_limit=5)
    with TARGET:
        lowered = pipeline(block)
    (report,) = [r for r in pipeline.reports if r.function == "forward"]
    assert report.action == "planned" and report.memplan_bytes < report.relax_bytes
    assert "Relax" in report.line() and "bound" in report.line()
    assert "memplan_arena" in lowered["forward"].script()
    with TARGET:  # the small MLP: Relax's plan is already at the bound, and stays
        kept = memplan.tvm.pipeline(time_limit=5)
        kept(mlp)
    assert kept.reports[0].action.startswith("kept Relax's")
    with pytest.raises(ProblemError, match="needs a target"):
        memplan.tvm.pipeline()(mlp)


def test_two_live_tensors_on_the_same_bytes_are_caught(mlp):
    """A plan putting every tensor at offset 0 is refused by the validator, and so is a
    function rewritten to it (read back after the rewrite)."""
    planned = lower_to_planned(mlp)
    layout = relax_layouts(planned, "forward")[0]
    problem = layout.problem
    overlapping = Plan.from_offsets(problem, [0] * len(problem), planner="bad")
    with pytest.raises(InvalidPlanError):
        check(problem, overlapping)
    with pytest.raises(InvalidPlanError):
        rewrite_function(planned, "forward", {0: (layout, overlapping)})


ESCAPE = '''
# from tvm.script import ir as I
# from tvm.script import relax as R

@I.ir_module
class Module:
    @R.function(pure=False)
    def main(x: R.Tensor((4,), dtype="float32")) -> R.Tensor((4,), dtype="float32"):
        storage: R.Object = R.memory.alloc_storage(R.shape([16]), R.prim_value(0),
                                                   R.str("global"), R.dtype("float32"))
        a: R.Tensor((4,), dtype="float32") = R.memory.alloc_tensor(
            storage, R.prim_value(0), R.shape([4]), R.dtype("float32"), R.prim_value(0))
        _: R.Tuple = R.call_packed("vm.builtin.copy", x, a, ty_args=(R.Tuple,))
        return a
'''


def test_what_cannot_be_expressed_is_refused_or_left_to_relax():
    mod = tvm.script.from_source(ESCAPE)
    with pytest.raises(ProblemError, match="function 'main', binding 'a'"):
        memplan.from_relax(mod, "main")
    with TARGET, pytest.raises(ProblemError, match="binding 'a'"):
        memplan.tvm.memory_planning_pass()(mod)
    planning = memplan.tvm.memory_planning_pass(fallback="relax")
    with TARGET, pytest.warns(UserWarning, match="Relax's plan stays"):
        kept = planning(mod)
    tvm.ir.assert_structural_equal(kept, mod)
    assert planning.reports[0].action.startswith("left to Relax")


@pytest.mark.parametrize("kind", ["metal", "vulkan", "opencl", "webgpu", "rocm"])
def test_offsets_form_on_devices_that_copy_keeps_relax_plan_with_one_warning(block, kind):
    mod = lower_to_planned(block)
    planning = memplan.tvm.memory_planning_pass(form="offsets")
    with warnings.catch_warnings(record=True) as caught, tvm.target.Target(kind):
        warnings.simplefilter("always")
        kept = planning(mod)
    assert [str(w.message) for w in caught if "memplan" in str(w.message)] == [
        f"memplan leaves Relax's plan on {kind} devices: their ensure_zero_offset copies a "
        "tensor at an offset"]
    tvm.ir.assert_structural_equal(kept, mod)
    assert planning.reports and all(r.status == "relax" for r in planning.reports)


def test_vulkan_build_pipeline_is_relax_own_in_the_offsets_form(block):
    """The whole pipeline for a Vulkan target with ``form="offsets"`` (lowered only, no
    GPU): the module Relax's default pipeline gives, and one warning."""
    target = tvm.target.Target("vulkan")
    pipeline = memplan.tvm.pipeline(target=target, form="offsets")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lowered = pipeline(block)
    with target:
        tvm.ir.assert_structural_equal(lowered, relax.get_default_pipeline(target)(block))
    assert len([w for w in caught if "memplan" in str(w.message)]) == 1


@pytest.fixture(scope="module")
def gpu_decoder():
    """A small decoder whose Relax storages memplan's shared storages beat; its kernels
    scheduled with dlight's fallback rule for GPUs (the pipelines' own scheduling of its
    matmuls for Metal crashes in TVM's tensorize), so every GPU target lowers it."""
    mod = zoo.export(zoo.llama(layers=1, d=128, heads=4, kv_heads=2, ffn=256, vocab=100,
                               seq=32))
    with tvm.target.Target("vulkan"):
        return dlight.ApplyDefaultSchedule(dlight.gpu.Fallback())(mod)


def _storages(mod, function):
    """``mod[function]``'s VM storages after lowering: name -> bytes (None when symbolic);
    and whether any
    ``ensure_zero_offset`` is left."""
    sizes, copies = {}, False
    for block in mod[function].body.blocks:
        for binding in block.bindings:
            value = binding.value
            name = getattr(getattr(value, "op", None), "name", "") or \
                getattr(getattr(value, "op", None), "global_symbol", "")
            if name == "relax.vm.alloc_storage":  # symbolic: shape from a variable
                shape = value.args[0]
                sizes[binding.var.name] = int(shape.values[0]) if hasattr(shape, "values") \
                    else None
            copies |= "ensure_zero_offset" in str(name)
    return sizes, copies


@pytest.mark.parametrize("kind", ["vulkan", "metal", "webgpu", "opencl"])
def test_gpu_targets_lower_with_memplan_shared_storages(gpu_decoder, kind):
    """The whole pipeline for a GPU target (lowered only, no GPU): the function's storages
    are memplan's groups (one per group, each as large as its largest tensor), smaller
    than Relax's together, none above the target's cap, and nothing copies."""
    target = tvm.target.Target(kind)
    pipeline = memplan.tvm.pipeline(time_limit=5, target=target)
    lowered = pipeline(gpu_decoder)
    (report,) = [r for r in pipeline.reports if r.function == "forward"]
    assert report.form == "shared" and report.action == "planned"
    assert report.bound <= report.memplan_bytes < report.relax_bytes
    sizes, copies = _storages(lowered, "forward")
    ours = {n: b for n, b in sizes.items() if n.startswith("memplan_storage")}
    problem, plan = report.problem, report.plan
    groups: dict[int, int] = {}
    for size, offset in zip(problem.sizes.tolist(), plan.offsets.tolist(), strict=True):
        groups[offset] = max(groups.get(offset, 0), size)
    assert sorted(ours.values()) == sorted(groups.values()) and len(ours) == report.storages
    assert sum(ours.values()) == report.memplan_bytes
    cap = memplan.tvm.STORAGE_CAPS[kind]
    assert not copies and all(cap is None or b <= cap for b in ours.values())


def test_storage_cap_leaves_larger_tensors_to_relax_with_a_warning(gpu_decoder):
    """A cap below the largest tensors: their storages stay Relax's, the warning names
    them, and every storage of memplan's keeps under the cap."""
    mod = lower_to_planned(gpu_decoder, "webgpu")
    layout = relax_layouts(mod, "forward")[0]
    cap = sorted(layout.storage_bytes)[-2] - 1  # the two largest storages are over it
    planning = memplan.tvm.memory_planning_pass(5, storage_cap={"webgpu": cap})
    with warnings.catch_warnings(record=True) as caught, tvm.target.Target("webgpu"):
        warnings.simplefilter("always")
        planned = planning(mod)
    over = [i for i in layout.problem.ids
            if layout.problem.sizes[layout.problem.index(i)] > cap]
    (message,) = [str(w.message) for w in caught if "storage cap" in str(w.message)]
    assert over and all(i in message for i in over) and f"{cap:,} bytes" in message
    (report,) = planning.reports
    assert report.action == "planned" and not set(over) & set(report.problem.ids)
    sizes = {}
    for binding in planned["forward"].body.blocks[0].bindings:
        if binding.var.name.startswith("memplan_storage"):
            sizes[binding.var.name] = int(binding.value.args[0].values[0])
    assert sizes and max(sizes.values()) <= cap


@pytest.mark.parametrize(("options", "field"), [
    ({"form": "texture"}, "form"), ({"storage_cap": 0}, "storage_cap"),
    ({"storage_cap": {"webgpu": "128MiB"}}, "storage_cap"),
    ({"storage_cap": True}, "storage_cap")])
def test_a_bad_form_or_storage_cap_is_refused_naming_it(options, field):
    with pytest.raises(ProblemError, match=field):
        memplan.tvm.memory_planning_pass(**options)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_shared_storages_run_on_cpu_bit_identical(name):
    """The shared form on CPU, as it runs on a GPU (one storage per group, offset 0, no
    ``ensure_zero_offset``): outputs bit-identical to Relax's default build."""
    mod = zoo.export(MODELS[name]())
    pipeline = memplan.tvm.pipeline(5, form="shared")
    proof = prove_relax(mod, time_limit=5, lengths=(1, 5, 32), pipeline=pipeline)
    assert proof.ok, proof.lines()
    assert all(r.form == "shared" and r.memplan_bytes <= r.relax_bytes
               for r in proof.reports if r.tensors)
    with TARGET:
        lowered = memplan.tvm.pipeline(5, form="shared")(mod)
    for function in relax_functions(lowered):
        assert not _storages(lowered, function)[1]


def test_cuda_graphs_cache_the_arena_and_capture_the_same_kernels(block):
    """With ``relax.backend.use_cuda_graph``, TVM's CUDA pipeline runs ``RewriteCUDAGraph``
    after memplan's pass (lowered only: no GPU, no CUDA toolkit): memplan's arena, a static
    storage, becomes the graphs' one cached allocation, and the graphs capture the same
    kernels as with Relax's plan (the ``ensure_zero_offset`` views go into them)."""
    target = tvm.target.Target("cuda")
    with tvm.transform.PassContext(config={"relax.backend.use_cuda_graph": True}):
        pipeline = memplan.tvm.pipeline(time_limit=5, target=target)
        lowered = pipeline(block)
        with target:
            plain = relax.get_default_pipeline(target)(block)
    (report,) = [r for r in pipeline.reports if r.function == "forward"]
    assert report.action == "planned" and report.memplan_bytes < report.relax_bytes
    assert _calls(lowered, "cuda_graph_alloc") == [("relax.vm.alloc_storage",
                                                    report.memplan_bytes)]
    assert sum(size for _, size in _calls(plain, "cuda_graph_alloc")) == report.relax_bytes
    captured = {name: _calls(lowered, name) for name in _functions(lowered, "capture")}
    assert captured and all(captured.values()) and captured == {
        name: _calls(plain, name) for name in _functions(plain, "capture")}


def _functions(mod, part):
    return sorted(gv.name_hint for gv in mod.get_global_vars() if part in gv.name_hint)


def _calls(mod, function):
    """The kernels ``mod[function]`` calls, and its storages as (op, bytes), in order."""
    calls = []
    for block in mod[function].body.blocks:
        for binding in block.bindings:
            value = binding.value
            if isinstance(value, relax.Call) and isinstance(value.op, tvm.ir.GlobalVar):
                calls.append(value.op.name_hint)
            elif isinstance(value, relax.Call) and getattr(value.op, "name", "") == \
                    "relax.vm.alloc_storage":
                calls.append((value.op.name, int(value.args[0].values[0])))
    return calls


def test_several_functions_are_planned_each():
    class PrefillDecode(nn.Module):
        def __init__(self):
            self.block = zoo.Block(32, 2, 64)

        def prefill(self, x):
            return self.block(x)

        def decode(self, x):
            return self.block(x)

    spec = {"prefill": {"x": nn.spec.Tensor((1, 8, 32), "float32")},
            "decode": {"x": nn.spec.Tensor((1, 1, 32), "float32")}}
    mod, _ = PrefillDecode().export_tvm(spec)
    mod = relax.get_pipeline("zero")(mod)
    proof = prove_relax(mod, time_limit=5)
    assert proof.ok, proof.lines()
    assert {r.function for r in proof.reports} == {"prefill", "decode"}
    with pytest.raises(ProblemError, match="decode, prefill"):
        memplan.from_relax(mod, "forward")


def test_the_command_line_reads_and_proves_a_tvmscript_module(block, tmp_path, capsys):
    path = tmp_path / "block.py"
    path.write_text(block.script())
    assert main(["info", str(path)]) == 0
    assert main(["prove", str(path)]) == 0
    out = capsys.readouterr().out
    assert "bit-identical" in out and "forward (device 0)" in out
    assert main(["prove", str(path), str(tmp_path / "plan.json")]) != 0
