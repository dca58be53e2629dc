"""Sweeps on real Dask clusters: a local one of 2 worker processes, and `dask scheduler` +
`dask worker` processes on 127.0.0.1; a worker killed mid-sweep; Ctrl-C and resume.

Every row that holds a plan says it was validated on its worker (``valid``),
and the worker column names a worker of the cluster, not the test process.
The slow tasks are ``hill_climb`` with endless iterations on a problem whose
optimum lies above its lower bound, so each runs its whole time limit.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from onnx import TensorProto, helper, numpy_helper

import memplan
from memplan import Buffer, Problem, plan_with
from memplan.cli import main
from memplan.errors import ProblemError, UnknownPlannerError
from memplan.formats import memplan_json
from memplan.onnx.onnx import from_onnx
from memplan.onnx.onnx_batch import rebatch
from memplan.sweeps.sweep import SweepOptions, make_tasks, parse_capacity, sweep
from memplan.sweeps.sweep_io import read_rows
from memplan.sweeps.sweep_report import capacity_fit, planners_vs_optimum, smallest_fitting_capacity

from .conftest import light_models_dir

distributed = pytest.importorskip("distributed")
SLOW = {"hill_climb": {"iterations": 10**9}}  # runs its whole time limit on `fragmenting`


def tiny_onnx(path: Path) -> Path:
    """Fixed batch 1: x[1,4,8] -> Relu -> Reshape([1,-1]) -> Sigmoid -> y[1,32]."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Reshape", ["r", "shape"], ["flat"]),
             helper.make_node("Sigmoid", ["flat"], ["y"])]
    graph = helper.make_graph(
        nodes, "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32])],
        [numpy_helper.from_array(np.array([1, -1], dtype=np.int64), "shape")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    path.write_bytes(model.SerializeToString())
    return path


def fragmenting() -> Problem:
    """Live load 8, optimum 9: 4-aligned a and b overlap at step 1, c fits no hole."""
    return Problem([Buffer("a", 3, 0, 2, alignment=4), Buffer("b", 3, 1, 3, alignment=4),
                    Buffer("c", 2, 0, 3)], name="frag")


@pytest.fixture(scope="module")
def zoo(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("zoo")
    tiny_onnx(folder / "tiny.onnx")
    memplan_json.write_problem(folder / "frag.json", fragmenting())
    (folder / "chain.csv").write_text("id,lower,upper,size\nb1,0,3,4\nb2,3,9,4\nb3,1,5,2\n")
    (folder / "notes.txt").write_text("not a model: a sweep passes over it")
    return folder


@pytest.fixture(scope="module")
def slow_zoo(tmp_path_factory) -> Path:
    """Eight copies of the fragmenting problem: eight tasks that take their time limit."""
    folder = tmp_path_factory.mktemp("slow")
    for k in range(8):
        memplan_json.write_problem(folder / f"frag{k}.json", fragmenting())
    return folder


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=":0") as cluster, \
            distributed.Client(cluster) as connected:
        yield connected


def assert_planned_on_workers(table) -> None:
    """Every plan validated, on a Dask worker process (not here)."""
    planned = table[table["status"] != "error"]
    assert planned["valid"].all()
    assert planned["worker"].str.match(r"tcp://127\.0\.0\.1:\d+ pid \d+$").all()
    assert (planned["worker"].str.split(" pid ").str[1].astype(int) != os.getpid()).all()
    assert (planned["arena_size"] >= planned["lower_bound"]).all()


# ------------------------------------------------------------------ no cluster
def test_sizes_tasks_and_bad_input(zoo):
    assert [parse_capacity(t) for t in ("256KiB", "1MiB", "2MB", "512", "none", "file")] == \
        [262144, 1048576, 2_000_000, 512, None, "file"]
    with pytest.raises(ProblemError, match="not a memory size"):
        parse_capacity("12XB")
    tasks = make_tasks([zoo], batches=[1, 2, 4], capacities=["none", "1KiB"],
                       planners=["best", "exact"])
    by_model = {m: sum(t.model == m for t in tasks) for m in ("tiny", "frag", "chain")}
    assert by_model == {"tiny": 3 * 2 * 2, "frag": 2 * 2, "chain": 2 * 2}  # batch: ONNX only
    assert len({t.key for t in tasks}) == len(tasks)
    with pytest.raises(UnknownPlannerError, match="valid planners"):
        make_tasks([zoo], planners=["nosuch"])
    with pytest.raises(ProblemError, match="no such file"):
        make_tasks([zoo / "missing.onnx"])
    with pytest.raises(ProblemError, match="does not run"):
        make_tasks([zoo], planners=["best"], options=SLOW)


def test_cli_refuses_bad_input_before_starting_anything(zoo, tmp_path, capsys):
    assert main(["sweep", str(zoo / "missing.onnx")]) == 2
    assert "missing.onnx: no such file" in capsys.readouterr().err
    assert main(["sweep", str(zoo), "--planners", "nosuch"]) == 2
    assert "valid planners" in capsys.readouterr().err
    assert main(["sweep", str(zoo), "-o", str(tmp_path / "rows.txt")]) == 2
    assert "must end in .csv" in capsys.readouterr().err
    (tmp_path / "other.csv").write_text("a,b\n1,2\n")
    assert main(["sweep", str(zoo), "-o", str(tmp_path / "other.csv")]) == 2
    assert "not a memplan sweep's rows" in capsys.readouterr().err
    assert main(["sweep", str(zoo), "--capacity", "12XB"]) == 2
    assert "not a memory size" in capsys.readouterr().err


def test_rebatch_gives_a_model_that_runs_at_the_new_batch(zoo):
    ort = pytest.importorskip("onnxruntime")
    import onnx

    model = rebatch(onnx.load(zoo / "tiny.onnx"), 3)
    session = ort.InferenceSession(model.SerializeToString())
    x = np.random.default_rng(0).standard_normal((3, 4, 8)).astype(np.float32)
    (y,) = session.run(None, {"x": x})
    assert y.shape == (3, 32)
    np.testing.assert_allclose(y, 1 / (1 + np.exp(-np.maximum(x, 0).reshape(3, 32))),
                               rtol=1e-6)
    sizes = {b.id: b.size for b in from_onnx(model).buffers}
    assert sizes["x"] == sizes["y"] == 3 * 32 * 4
    squeeze = onnx.load(light_models_dir() / "light_squeezenet.onnx")
    bounds = [memplan.lower_bound(from_onnx(rebatch(squeeze, b))) for b in (1, 2)]
    assert bounds[1] == 2 * bounds[0]


def test_report_answers_from_rows(zoo):
    rows = [dict(model="m", bindings="", capacity=c, planner=p, status=s, arena_size=a,
                 best_bound=b, lower_bound=8, batch=None)
            for c, p, s, a, b in [(None, "first_fit", "feasible", 12, 8),
                                  (None, "exact", "optimal", 9, 9),
                                  (8, "exact", "infeasible", 9, 9), (9, "best", "feasible", 9, 8),
                                  (16, "best", "feasible", 9, 8)]]
    table = pd.DataFrame(rows).astype({"capacity": "Int64"})
    over = planners_vs_optimum(table).set_index("planner")["mean_over"]
    assert over["exact"] == 0 and over["first_fit"] == pytest.approx(12 / 9 - 1)
    fit = capacity_fit(table).set_index("capacity")["verdict"]
    assert fit[8] == "proven: needs >= 9 B" and fit[9].startswith("fits (best")
    assert smallest_fitting_capacity(table) == 9


# ------------------------------------------------------------------ a local cluster
def test_sweep_on_a_local_cluster(zoo, client, tmp_path):
    (tmp_path / "bad.csv").write_text("id,lower,upper,size\nb1,0,3,four\n")
    out = tmp_path / "rows.csv"
    table = sweep([zoo, tmp_path / "bad.csv"], batches=[1, 2], capacities=["none", "300B"],
                  planners=["greedy_by_size", "exact", "solve"], time_limit=60, client=client,
                  out=out)
    assert len(table) == (2 + 1 + 1 + 1) * 2 * 3  # (tiny x 2 batches, frag, chain, bad) x 2 x 3
    bad = table[table["model"] == "bad"]
    assert (bad["status"] == "error").all() and bad["error"].str.contains("bad.csv:2").all()
    assert (table["model"] != "bad").eq(table["status"] != "error").all()  # the rest ran
    assert_planned_on_workers(table)
    tiny = table[table["model"] == "tiny"].set_index(["batch", "capacity", "planner"])
    assert tiny.loc[(1, pd.NA, "exact"), "lower_bound"] == 256
    assert tiny.loc[(2, pd.NA, "exact"), "lower_bound"] == 512
    assert tiny.loc[(1, 300, "exact"), "status"] == "optimal"  # fits 300 bytes at batch 1
    assert tiny.loc[(2, 300, "exact"), "status"] == "infeasible"  # proven not to at batch 2
    assert tiny.loc[(2, 300, "exact"), "best_bound"] > 300
    frag = table[table["model"] == "frag"].set_index(["capacity", "planner"])
    assert frag.loc[(pd.NA, "solve"), "status"] == "optimal"  # 9, above the lower bound 8
    assert frag.loc[(pd.NA, "solve"), "best_bound"] == 9
    assert frag.loc[(pd.NA, "exact"), "arena_size"] == 9
    assert frag.loc[(pd.NA, "greedy_by_size"), "lower_bound"] == 8
    tight = sweep([zoo / "frag.json"], capacities=["8B"], planners=["exact"], client=client)
    assert tight["status"].item() == "infeasible" and tight["best_bound"].item() == 9
    direct = plan_with("greedy_by_size", memplan.load(zoo / "chain.csv"))
    row = table[(table["model"] == "chain") & (table["planner"] == "greedy_by_size")
                & table["capacity"].isna()]
    assert row["arena_size"].item() == direct.arena_size
    on_disk = read_rows(out)
    assert sorted(on_disk["task"]) == sorted(table["task"])
    assert (on_disk["arena_size"].fillna(-1) == on_disk.set_index("task").loc[
        on_disk["task"], "arena_size"].fillna(-1).to_numpy()).all()


def test_a_sweep_takes_a_record_or_its_fields(zoo, client):
    """`SweepOptions` or its fields as keywords, the same rows; not both; the planners' own
    options under their old keyword still work, with a `DeprecationWarning`."""
    record = SweepOptions(capacities=["none"], planners=["naive", "first_fit"], seed=1)
    assert record.planners == ("naive", "first_fit") and record.capacities == ("none",)
    by_record = sweep([zoo / "chain.csv"], record, client=client)
    by_fields = sweep([zoo / "chain.csv"], capacities=["none"], planners=["naive", "first_fit"],
                      seed=1, client=client)
    assert by_record.drop(columns=["seconds", "total_seconds", "peak_memory", "worker"]).equals(
        by_fields.drop(columns=["seconds", "total_seconds", "peak_memory", "worker"]))
    with pytest.raises(TypeError, match="not both"):
        sweep([zoo / "chain.csv"], record, seed=2, client=client)
    with pytest.warns(DeprecationWarning, match="planner_options"):
        old = sweep([zoo / "frag.json"], planners=["hill_climb"], heuristic_time_limit=0.2,
                    options={"hill_climb": {"iterations": 7}}, client=client)
    new = sweep([zoo / "frag.json"], planners=["hill_climb"], heuristic_time_limit=0.2,
                planner_options={"hill_climb": {"iterations": 7}}, client=client)
    assert old["task"].tolist() == new["task"].tolist()  # the options are part of the key
    assert old["valid"].all() and new["valid"].all()


def test_parquet_output_and_resume(zoo, client, tmp_path):
    pytest.importorskip("pyarrow")
    out = tmp_path / "rows.parquet"
    first = sweep([zoo / "chain.csv"], planners=["best", "first_fit"], client=client, out=out)
    again = sweep([zoo / "chain.csv"], planners=["best", "first_fit", "naive"], client=client,
                  out=out)
    assert first.attrs["ran"] == 2 and again.attrs["skipped"] == 2 and again.attrs["ran"] == 1
    assert sorted(read_rows(out)["planner"]) == ["best", "first_fit", "naive"]


def test_each_task_gets_the_whole_time_limit(slow_zoo, client):
    limit = 0.3  # eight tasks that each run their whole limit: the limit is each one's
    table = sweep([slow_zoo], planners=["hill_climb"], heuristic_time_limit=limit,
                  planner_options=SLOW, client=client)
    assert len(table) == 8 and table["valid"].all()
    assert table["seconds"].between(0.9 * limit, 1.1 * limit + 0.1).all(), table["seconds"]


def test_a_killed_worker_loses_no_row(slow_zoo, client):
    pids = client.run(os.getpid)
    killed = []

    def kill_one(row):
        if not killed:  # mid-sweep: one row in, seven to go, both workers busy
            address, pid = sorted(pids.items())[0]
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    table = sweep([slow_zoo], planners=["hill_climb"], heuristic_time_limit=0.4,
                  planner_options=SLOW,
                  client=client, on_row=kill_one)
    assert killed and len(table) == 8
    assert (table["status"] == "feasible").all() and (table["arena_size"] == 9).all()
    assert_planned_on_workers(table)
    deadline = time.monotonic() + 60
    while True:  # the nanny restarts the killed worker
        try:
            now = client.run(os.getpid)
            if len(now) == 2:
                break
        except OSError:  # CommClosedError: the dead worker was still listed
            pass
        assert time.monotonic() < deadline, "the killed worker was not restarted"
        time.sleep(0.2)
    assert killed[0] not in now.values()


# ------------------------------------------------------------------ processes
def _wait_for(path: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists() or path.stat().st_size == 0:
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.1)


def test_cli_on_dask_scheduler_and_worker_processes(zoo, tmp_path, capsys):
    address_file = tmp_path / "scheduler.json"
    dask = [sys.executable, "-m", "dask"]
    scheduler = subprocess.Popen([*dask, "scheduler", "--host", "127.0.0.1", "--port", "0",
                                  "--no-dashboard", "--scheduler-file", str(address_file)],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    worker = None
    try:
        _wait_for(address_file)
        address = json.loads(address_file.read_text())["address"]
        assert address.startswith("tcp://127.0.0.1:")
        worker = subprocess.Popen([*dask, "worker", address, "--nworkers", "2", "--nthreads",
                                   "1", "--no-dashboard", "--host", "127.0.0.1"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with distributed.Client(address, timeout="30s") as watcher:
            watcher.wait_for_workers(2, timeout=60)
        out, report = tmp_path / "rows.csv", tmp_path / "report.html"
        code = main(["sweep", str(zoo / "tiny.onnx"), str(zoo / "frag.json"), "--batch", "1,2,4",
                     "--capacity", "none,1KiB", "--planners", "best,exact", "--time-limit", "5",
                     "--scheduler", address, "-o", str(out), "--report", str(report)])
        printed = capsys.readouterr().out
        assert code == 0, printed
        table = read_rows(out)
        assert len(table) == (3 + 1) * 2 * 2 and table["valid"].all()
        assert table["worker"].str.startswith("tcp://127.0.0.1:").all()
        assert "16 of 16" in printed and "validated   16 of 16" in printed
        page = report.read_text()
        assert page.count("<img") == 3 and "fits every model" in page
    finally:
        for process in (worker, scheduler):
            if process is not None:
                process.terminate()
                process.wait(timeout=30)


def test_ctrl_c_keeps_rows_and_the_same_command_resumes(slow_zoo, tmp_path):
    out = tmp_path / "rows.csv"
    command = [sys.executable, "-m", "memplan.cli", "sweep", str(slow_zoo), "--planners",
               "hill_climb", "--option", "hill_climb.iterations=1000000000",
               "--heuristic-time-limit", "0.5", "--workers", "2", "-o", str(out)]
    first = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)
    deadline = time.monotonic() + 120
    while (len(out.read_text().splitlines()) if out.exists() else 0) < 2:  # header + a row
        assert time.monotonic() < deadline and first.poll() is None
        time.sleep(0.05)
    os.killpg(first.pid, signal.SIGINT)  # what a terminal does on Ctrl-C: the whole group
    stdout, stderr = first.communicate(timeout=120)
    assert first.returncode == 130, stderr
    kept = read_rows(out)
    assert 1 <= len(kept) < 8 and kept["valid"].all()
    assert "interrupted" in stdout and "resume" in stdout
    second = subprocess.run(command, capture_output=True, text=True, timeout=180)
    assert second.returncode == 0, second.stderr
    assert f"resumed     {len(kept)} rows" in second.stdout
    table = read_rows(out)
    assert len(table) == 8 and table["task"].is_unique and table["valid"].all()
    assert set(kept["task"]) < set(table["task"])
