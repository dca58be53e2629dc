"""Exports: every format writes what its reader (gcc, TFLite-Micro's layout, ONNX) reads back."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from memplan.errors import ProblemError
from memplan.formats import memplan_json, minimalloc_csv
from memplan.formats.c_header import buffer_names
from memplan.formats.writers import FORMATS, c_header, export, offline_plan, read_offline_plan
from memplan.onnx.onnx_metadata import annotate, read_plan
from memplan.plan import Plan
from memplan.problem import Buffer, Problem, Region
from memplan.validate import check

#  address
#    ^  +----------+
#    |  |  b:0/x   | "c-d" [2, 4)
#    |  +----+-----+-----+
#    |  | a/in    |  c-d |      a [0, 2), b:0/x [1, 3), c-d [2, 4), 2b [3, 4) scratch
#    +--+---------+------+---> time
BUFFERS = [Buffer("a/in", 64, 0, 2), Buffer("b:0/x", 32, 1, 3), Buffer("c-d", 64, 2, 4),
           Buffer("2b", 16, 3, 4, kind="scratch", max_size=32)]


def _problem_and_plan(**changes) -> tuple[Problem, Plan]:
    problem = Problem(BUFFERS, name="tiny/net", **changes)
    plan = Plan.from_offsets(problem, [0, 64, 0, 64], planner="hand")
    check(problem, plan)
    return problem, plan


def _defines(text: str) -> dict[str, int]:
    return {name: int(value) for name, value in re.findall(r"#define (\w+) (\d+)u", text)}


def test_c_header_compiles_and_reads_back(tmp_path):
    problem, plan = _problem_and_plan()
    path = tmp_path / "plan.h"
    export(problem, plan, "c", path, prefix="net")
    text = path.read_text()
    defines = _defines(text)
    assert defines["NET_ARENA_SIZE"] == plan.arena_size == 96
    names = buffer_names(problem, "NET")
    assert names == ["NET_A_IN", "NET_B_0_X", "NET_C_D", "NET_2B"]
    for idx, name in enumerate(names):
        assert defines[f"{name}_OFFSET"] == plan.offsets[idx]
        assert defines[f"{name}_SIZE"] == problem.sizes[idx]
    assert "#ifndef NET_PLAN_H" in text and text.rstrip().endswith("/* NET_PLAN_H */")
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    program = tmp_path / "main.c"
    program.write_text('#include "plan.h"\n#include "plan.h"\n#include <stdio.h>\n'
                       "int main(void) { printf(\"%u %u\\n\", NET_ARENA_SIZE, NET_C_D_OFFSET);"
                       " return 0; }\n")
    subprocess.run(["gcc", "-fsyntax-only", "-Wall", "-Werror", str(program)], check=True,
                   cwd=tmp_path)


def test_c_identifiers_stay_unique():
    problem = Problem([Buffer("a.b", 4, 0, 1), Buffer("a-b", 4, 0, 1), Buffer("A_B", 4, 1, 2),
                       Buffer("***", 4, 1, 2)])
    names = buffer_names(problem, "P")
    assert names == ["P_A_B_0", "P_A_B_1", "P_A_B_2", "P_BUFFER"]
    with pytest.raises(ValueError, match="not a C identifier"):
        c_header(problem, Plan.from_offsets(problem, [0, 4, 0, 4], planner="hand"), prefix="9x")


def test_c_header_with_regions_and_granted_sizes():
    problem = Problem(BUFFERS, regions=[Region("sram", 96), Region("dram", None, 1.0)])
    plan = Plan.from_offsets(problem, [0, 0, 0, 64], planner="hand", regions=[0, 1, 0, 0],
                             sizes=[64, 32, 64, 32])
    check(problem, plan)
    defines = _defines(c_header(problem, plan))
    assert defines["MEMPLAN_REGION_SRAM"] == 0 and defines["MEMPLAN_REGION_DRAM"] == 1
    assert defines["MEMPLAN_REGION_SRAM_SIZE"] == 96
    assert defines["MEMPLAN_REGION_DRAM_SIZE"] == 32
    assert defines["MEMPLAN_B_0_X_REGION"] == 1
    assert defines["MEMPLAN_2B_SIZE"] == 32  # the granted size, not the minimum


def test_tflm_buffer_decodes_back(tmp_path):
    problem, plan = _problem_and_plan()
    tensors = ["weights", "a/in", "b:0/x", "c-d", "bias"]  # the model's tensor order
    path = tmp_path / "offline.bin"
    export(problem, plan, "tflm", path, model=tensors, subgraph=0)
    data = path.read_bytes()
    assert len(data) == 4 * (3 + len(tensors))
    assert data[:12] == (0).to_bytes(4, "little") * 2 + (5).to_bytes(4, "little")
    version, subgraph, offsets = read_offline_plan(data)
    assert (version, subgraph) == (0, 0)
    assert offsets.tolist() == [-1, 0, 64, 0, -1]  # the scratch buffer is TFLM's own
    assert offline_plan(problem, plan).tolist() == [0, 0, 4, 0, 64, 0, 64]


def test_tflm_refuses_what_it_cannot_hold():
    problem, plan = _problem_and_plan()
    with pytest.raises(ProblemError, match="not tensors of the model"):
        offline_plan(problem, plan, tensors=["a/in"])
    with pytest.raises(ProblemError, match="announces"):
        read_offline_plan(np.array([0, 0, 3, 1], "<i4").tobytes())


def _onnx_model() -> onnx.ModelProto:
    x = helper.make_tensor_value_info("a/in", TensorProto.FLOAT, [16])
    y = helper.make_tensor_value_info("c-d", TensorProto.FLOAT, [16])
    graph = helper.make_graph([helper.make_node("Relu", ["a/in"], ["b:0/x"]),
                               helper.make_node("Relu", ["b:0/x"], ["c-d"])], "g", [x], [y])
    model = helper.make_model(graph)
    model.metadata_props.add(key="author", value="test")
    return model


def test_onnx_metadata_round_trip(tmp_path):
    problem, plan = _problem_and_plan()
    path = tmp_path / "annotated.onnx"
    export(problem, plan, "onnx", path, model=_onnx_model())
    props = {p.key: p.value for p in onnx.load(str(path)).metadata_props}
    assert props["author"] == "test" and props["memplan.arena_size"] == "96"
    back = read_plan(path, problem)
    assert back.offsets.tolist() == plan.offsets.tolist()
    assert (back.arena_size, back.status, back.planner) == (96, plan.status, "hand")
    check(problem, back)
    again = annotate(onnx.load(str(path)), problem, plan)  # re-annotating replaces, not adds
    assert [p.key for p in again.metadata_props].count("memplan.plan") == 1
    with pytest.raises(ProblemError, match="no 'memplan.plan'"):
        read_plan(_onnx_model(), problem)


def test_json_and_csv_exports_read_back(tmp_path):
    problem, plan = _problem_and_plan()
    export(problem, plan, "json", tmp_path / "plan.json")
    back_problem = memplan_json.read_problem(tmp_path / "plan.json")
    back_plan = memplan_json.read_plan(tmp_path / "plan.json", back_problem)
    assert back_problem.ids == problem.ids
    check(back_problem, back_plan)
    assert json.loads((tmp_path / "plan.json").read_text())["plan"]["arena_size"] == 96
    granted = Plan.from_offsets(problem, plan.offsets, planner="hand", sizes=[64, 32, 64, 32])
    export(problem, granted, "csv", tmp_path / "plan.csv")
    csv_problem, offsets = minimalloc_csv.read_solution(tmp_path / "plan.csv")
    assert offsets == dict(zip(problem.ids, plan.offsets.tolist(), strict=True))
    assert csv_problem.sizes.tolist() == [64, 32, 64, 32]
    check(csv_problem, offsets)


def test_unknown_format_lists_the_valid_ones(tmp_path):
    problem, plan = _problem_and_plan()
    with pytest.raises(ValueError, match="valid formats: " + ", ".join(FORMATS)):
        export(problem, plan, "xml", tmp_path / "plan.xml")
    with pytest.raises(ValueError, match="pass model="):
        export(problem, plan, "onnx", tmp_path / "plan.onnx")
