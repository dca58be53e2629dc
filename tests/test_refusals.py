"""Bad input on every surface: one line naming the problem, the documented exit code.

Each test builds its own small input (a model, a rows file, a corrupt
flatbuffer) and checks what the command or the function says about it.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
from pathlib import Path

import pytest

from memplan.cli import main
from memplan.errors import ProblemError


def run_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


def one_line_error(err: str, *needles: str) -> None:
    assert err.count("\n") == 1 and err.startswith("memplan ") and "Traceback" not in err, err
    for needle in needles:
        assert needle in err, (needle, err)


def onnx_model(path: Path, nodes, inputs, outputs, initializers=()) -> Path:
    from onnx import helper

    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    path.write_bytes(model.SerializeToString())
    return path


def float_input(name: str, shape):
    from onnx import TensorProto, helper

    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


# ------------------------------------------------------------------ sweep
def test_a_scheduler_address_that_is_not_one_is_refused_in_one_line(tmp_path):
    pytest.importorskip("distributed")
    from memplan.sweeps.sweep import scheduler_address

    model = tmp_path / "m.csv"
    model.write_text("id,lower,upper,size\nb1,0,3,4\n")
    for address in ("tcp://127.0.0.1:notaport", "tcp://127.0.0.1:70000", "tcp://", "a b:1"):
        code, _, err = run_cli("sweep", model, "--scheduler", address)
        assert code == 2
        one_line_error(err, "--scheduler", repr(address))
    assert scheduler_address("tcp://127.0.0.1:8786") == "tcp://127.0.0.1:8786"
    assert scheduler_address("localhost:8786") == "localhost:8786"


# ------------------------------------------------------------------ reorder and ONNX messages
def test_reordering_a_model_without_buffers_keeps_the_file_order_and_says_so(tmp_path):
    from onnx import helper

    path = onnx_model(tmp_path / "empty.onnx", [helper.make_node("Relu", ["x"], ["y"])],
                      [float_input("x", [0, 4])], [float_input("y", [0, 4])])
    for method in ("exact", "fast"):
        code, out, err = run_cli("solve", path, "--reorder", "--reorder-method", method)
        assert code == 0 and err == "", err
        (line,) = [row for row in out.splitlines() if row.startswith("operator order")]
        assert "file order kept: no buffers to plan" in line


def test_errors_of_the_reorder_path_name_the_file(tmp_path):
    from onnx import helper

    path = onnx_model(tmp_path / "sym.onnx", [helper.make_node("Relu", ["x"], ["y"])],
                      [float_input("x", ["N", 4])], [float_input("y", ["N", 4])])
    for extra in ([], ["--reorder"], ["--reorder", "--reorder-method", "exact"]):
        code, _, err = run_cli("solve", path, *extra)
        assert code == 2
        one_line_error(err, f"{path}: tensor 'x'", "--dim N=")


def test_shape_inference_errors_are_one_line(tmp_path):
    from onnx import helper

    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Cast", ["a"], ["b"], to=99),
             helper.make_node("Reshape", ["b", "x"], ["y"])]  # two errors: ONNX gives two lines
    path = onnx_model(tmp_path / "two.onnx", nodes, [float_input("x", [2, 4])],
                      [float_input("y", [2, 4])])
    for extra in ([], ["--reorder"]):
        code, _, err = run_cli("solve", path, *extra)
        assert code == 2
        one_line_error(err, str(path), "shape inference failed", "Cast", "Reshape", "--no-strict")
    with pytest.raises(ProblemError) as error:
        from memplan.onnx.onnx import from_onnx

        from_onnx(path)
    assert "\n" not in str(error.value)


# ------------------------------------------------------------------ sweep rows on disk
def _row(key: str, **values) -> dict:
    from memplan.sweeps.sweep_io import finish_row

    return finish_row({"task": key, "model": "m", "path": "m.csv", "planner": "best",
                       "status": "feasible", "arena_size": 12, "valid": True,
                       "settings": "time_limit=1.0,seed=0", **values})


def test_a_rows_file_cut_inside_a_quoted_field_loses_only_the_cut_row(tmp_path):
    from memplan.sweeps.sweep_io import RowsWarning, RowWriter, read_rows

    out = tmp_path / "rows.csv"
    writer = RowWriter(out)
    for k in range(3):
        writer.append(_row(f"m.csv||file|p{k}|time_limit=1.0,seed=0"))
    writer.close()
    whole = out.read_bytes()
    for cut in (10, 1, len(whole.splitlines(keepends=True)[-1]) - 2):  # inside the quoted key
        out.write_bytes(whole[:-cut])
        assert len(read_rows(out)) == 2  # a reader drops the cut row and leaves the file
        assert out.read_bytes() == whole[:-cut]
        writer = RowWriter(out)
        with pytest.warns(RowsWarning, match=r"rows.csv:4: dropped a row cut short"):
            assert sorted(writer.existing()) == [f"m.csv||file|p{k}|time_limit=1.0,seed=0"
                                                 for k in range(2)]
        writer.append(_row("m.csv||file|again|time_limit=1.0,seed=0"))
        writer.close()
        assert list(read_rows(out)["planner"]) == ["best"] * 3
        assert list(read_rows(out)["task"].str.split("|").str[3]) == ["p0", "p1", "again"]
    out.write_bytes(whole.replace(b'"m.csv||file|p0', b'"m.csv||file|p0"x', 1))
    with pytest.raises(ProblemError, match=r"rows.csv:2: not a CSV row"):
        read_rows(out)


def test_resuming_the_cli_sweep_from_a_cut_rows_file(tmp_path):
    pytest.importorskip("distributed")
    model = tmp_path / "example.12.csv"
    model.write_text("id,lower,upper,size\nb1,0,3,4\nb2,3,9,4\nb3,1,5,2\nb4,0,9,8\n")
    out = tmp_path / "rows.csv"
    argv = ["sweep", model, "--workers", "1", "--planners", "best,naive", "-o", out,
            "--quiet"]
    assert run_cli(*argv)[0] == 0
    out.write_bytes(out.read_bytes()[:-10])  # the second row cut inside its quoted key
    code, _, err = run_cli(*argv)
    assert code == 0 and err.count("\n") == 1 and "rows.csv:3: dropped a row cut short" in err
    from memplan.sweeps.sweep_io import read_rows

    assert sorted(read_rows(out)["planner"]) == ["best", "naive"]


# ------------------------------------------------------------------ models sharing a stem
def test_models_sharing_a_stem_are_told_apart_in_rows_keys_and_report(tmp_path):
    import pandas as pd

    from memplan.sweeps.sweep import make_tasks
    from memplan.sweeps.sweep_report import capacity_fit, smallest_fitting_capacity
    from memplan.sweeps.sweep_tasks import model_names

    for folder, size in (("small", 8), ("big", 64)):
        (tmp_path / "zoo" / folder).mkdir(parents=True)
        (tmp_path / "zoo" / folder / "model.csv").write_text(
            f"id,lower,upper,size\na,0,2,{size}\nb,1,3,{size}\n")
    (tmp_path / "zoo" / "big" / "model.json").write_text("{}")
    (tmp_path / "zoo" / "other.csv").write_text("id,lower,upper,size\na,0,1,4\n")
    tasks = make_tasks([tmp_path / "zoo"], capacities=[32, 256], planners=["exact"])
    names = {t.path: t.model for t in tasks}
    zoo = str(tmp_path / "zoo")
    assert names == {f"{zoo}/big/model.csv": "big/model.csv", f"{zoo}/big/model.json":
                     "model.json", f"{zoo}/small/model.csv": "small/model",
                     f"{zoo}/other.csv": "other"}
    assert len({t.key for t in tasks}) == len(tasks) == 8
    assert model_names(["a/m.onnx", "b/m.onnx"]) == {"a/m.onnx": "a/m", "b/m.onnx": "b/m"}
    # rows as a sweep writes them, and as older sweeps did (the stem alone): big is proven
    # not to fit 32 bytes, so the smallest capacity that fits every model is 256
    rows = [dict(path=path, bindings="", capacity=c, planner="exact", status=s,
                 arena_size=a, best_bound=a, lower_bound=a, batch=None)
            for path, c, s, a in [("zoo/small/model.csv", 32, "optimal", 16),
                                  ("zoo/big/model.csv", 32, "infeasible", 128),
                                  ("zoo/small/model.csv", 256, "optimal", 16),
                                  ("zoo/big/model.csv", 256, "optimal", 128)]]
    for named in ({"zoo/small/model.csv": "small/model", "zoo/big/model.csv": "big/model"},
                  {"zoo/small/model.csv": "model", "zoo/big/model.csv": "model"}):
        table = pd.DataFrame([{**r, "model": named[r["path"]]} for r in rows]).astype(
            {"capacity": "Int64"})
        assert smallest_fitting_capacity(table) == 256
        fit = capacity_fit(table)
        assert fit["shape"].nunique() == 2 and not fit.set_index(["capacity", "shape"]).loc[
            (32, fit["shape"][fit["shape"].str.contains("big")].iloc[0]), "fits"]


# ------------------------------------------------------------------ re-batching
def test_rebatching_refuses_an_input_without_a_leading_batch_dimension(tmp_path):
    from onnx import helper

    from memplan.onnx.onnx import from_onnx
    from memplan.onnx.onnx_batch import rebatch
    from memplan.onnx.onnx_graph import load_model

    def model(shape):
        nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Neg", ["r"], ["y"])]
        path = onnx_model(tmp_path / "m.onnx", nodes, [float_input("x", shape)],
                          [float_input("y", shape)])
        return load_model(path)[0]

    for shape in ([7], []):
        with pytest.raises(ProblemError) as error:
            rebatch(model(shape), 3, source="m.onnx")
        assert str(error.value).startswith(f"m.onnx: cannot re-batch: input 'x' of shape "
                                           f"{shape} has no leading batch dimension")
        assert "\n" not in str(error.value)
    sizes = {b.id: b.size for b in from_onnx(rebatch(model(["N"]), 3)).buffers}
    assert sizes["x"] == 3 * 4  # a symbolic leading dimension is a batch, even alone
    sizes = {b.id: b.size for b in from_onnx(rebatch(model([1, 7]), 3)).buffers}
    assert sizes["x"] == 3 * 7 * 4


# ------------------------------------------------------------------ CSV numbers
@pytest.mark.parametrize("cell", ["1_000", "\u0661\u0662", "4.0", "+4", "1e3", "", "4 4"])
def test_csv_numbers_are_ascii_digits_only(cell, tmp_path):
    path = tmp_path / "p.csv"
    path.write_text(f"id,lower,upper,size\na,0,1,{cell}\n", encoding="utf-8")
    code, _, err = run_cli("info", path)
    assert code == 2
    one_line_error(err, f"{path}:2: size must be an integer in ASCII digits, got {cell!r}")
    path.write_text("id,lower,upper,size\na,0,1, 1000 \n")
    assert run_cli("info", path)[0] == 0
    from memplan.formats.minimalloc_csv import capacity_from_name

    assert capacity_from_name("A.1048576.csv") == 1048576
    assert capacity_from_name("A.\u0661\u0662.csv") is None and capacity_from_name("A.1_0.csv") \
        is None


def _safe_line(err: str) -> str:
    """The one error line, with nothing in it a terminal would act on, and not too long."""
    from memplan.errors import LONGEST_LINE

    one_line_error(err)
    line = err.rstrip("\n")
    assert all(ch.isprintable() for ch in line), repr(line[:300])
    assert len(line) <= LONGEST_LINE + 40, len(line)
    return line


HOSTILE = "\x1b]0;owned\x07\x1b[2J\u2028\x9b31m"  # a window title, a clear screen, C1 CSI


def test_error_lines_escape_what_a_file_names_and_cut_a_long_one(tmp_path):
    named = tmp_path / f"bad{HOSTILE}.csv"
    named.write_text("not,a,problem\n")
    line = _safe_line(run_cli("info", named)[2])
    assert "bad\\x1b]0;owned\\x07\\x1b[2J\\u2028\\x9b31m.csv" in line
    unreadable = Path(os.fsdecode(bytes(tmp_path) + b"/\xff\xfe.csv"))  # not UTF-8
    unreadable.write_text("id,lower,upper,size\na,0,1,x\n")
    assert "/\\xff\\xfe.csv" in _safe_line(run_cli("info", unreadable)[2])
    long_kind = tmp_path / "kind.json"
    long_kind.write_text(json.dumps({"format": "memplan-problem", "version": 1, "buffers": [
        {"id": "a", "size": 1, "start": 0, "end": 1, "kind": HOSTILE + "k" * 35000}]}))
    line = _safe_line(run_cli("solve", long_kind)[2])
    assert line.startswith(f"memplan solve: error: {long_kind}: buffer 'a': unknown kind")
    assert "characters cut" in line and line.endswith("kkk'; valid kinds: activation, input, "
                                                       "output, scratch, weight")
    line = _safe_line(run_cli("info", tmp_path / (HOSTILE + "n" * 35000) / "m.onnx")[2])
    assert "characters cut" in line and "\\x1b[2J" in line


def test_usage_errors_escape_the_arguments_too():
    line = _safe_line(run_cli("solve", "--no-such" + HOSTILE + "x" * 35000)[2])
    assert "unrecognized arguments: --no-such\\x1b]0;owned" in line
