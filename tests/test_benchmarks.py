"""Smoke test of the benchmark runner on the tiny suite, so it never silently breaks.

The planners come from a plugin written here (a stacking planner, one that
returns overlapping offsets, one that hangs), so that the test depends
neither on which planners exist yet nor on how fast they are.
"""

import csv
import hashlib
import json
import textwrap

import numpy as np
import pytest

from benchmarks.__main__ import main
from benchmarks.generate import conflict_graph, network_like
from benchmarks.large import decoder_model, decoder_problem, transformer_decoder
from benchmarks.runner import run_task
from benchmarks.suites import eight_operators, fit_five
from memplan.onnx.onnx import from_onnx

PLUGIN = textwrap.dedent("""
    import time
    import numpy as np
    from memplan.plan import Plan
    from memplan.registry import register

    @register("bench_stack")
    def stack(problem, *, time_limit=None, seed=0, hint=None, **options):
        offsets, top = [], 0
        for size, alignment in zip(problem.sizes.tolist(), problem.alignments.tolist()):
            top = -(-top // alignment) * alignment
            offsets.append(top)
            top += size
        return Plan.from_offsets(problem, offsets, planner="bench_stack")

    @register("bench_broken")
    def broken(problem, **options):
        return Plan.from_offsets(problem, np.zeros(len(problem), np.int64), planner="bench_broken")

    @register("bench_hang")
    def hang(problem, **options):
        time.sleep(60)
""")


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    """The plugin's path. Its planners (one deliberately broken) are registered in this
    process only for the test: the registry and the imported plugin modules are put back
    afterwards, so they do not leak into later tests (`compare` runs every planner)."""
    import sys

    from memplan import registry

    monkeypatch.setattr(registry, "_PLANNERS", dict(registry._PLANNERS))
    before = {name for name in sys.modules if name.startswith("benchmark_plugin_")}
    path = tmp_path / "bench_plugin.py"
    path.write_text(PLUGIN)
    yield str(path)
    for name in [n for n in sys.modules if n.startswith("benchmark_plugin_")]:
        if name not in before:
            del sys.modules[name]


def test_runner_tables_and_loud_invalid_plans(tmp_path, plugin):
    out, doc = tmp_path / "out", tmp_path / "BENCHMARKS.md"
    doc.write_text("# Benchmarks\n\nHand-written context stays.\n")
    argv = ["run", "--suite", "tiny", "--planner", "bench_stack,bench_broken", "--import",
            plugin, "--mode", "fit,minimise", "--jobs", "2", "--out", str(out),
            "--section", "tiny", "--doc", str(doc)]
    assert main(argv) == 2  # the broken planner's invalid plans make the run fail
    with (out / "results.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert {(r["problem"], r["mode"]) for r in rows} == {
        ("chain-40", "minimise"), ("conflicts-8", "minimise"), ("fit-five", "fit"),
        ("fit-five", "minimise")}
    for row in rows:
        if row["planner"] == "bench_broken":
            assert row["status"] == "INVALID" and row["arena_size"] == ""
            assert "overlap" in row["note"] or "conflict" in row["note"]
        else:
            assert row["status"] in ("feasible", "optimal", "infeasible")
            assert int(row["arena_size"]) >= int(row["lower_bound"]) > 0
            assert float(row["seconds"]) >= 0 and float(row["peak_rss_mb"]) > 0
    fit = next(r for r in rows if r["problem"] == "fit-five" and r["mode"] == "fit"
               and r["planner"] == "bench_stack")
    assert fit["status"] == "infeasible" and fit["capacity"] == "12"  # stacking needs 28
    text = doc.read_text()
    assert "Hand-written context stays." in text and "**INVALID**" in text
    assert "<!-- generated: tiny" in text and "<!-- generated: machine" in text
    assert main(["regenerate", "--doc", str(doc)]) == 2  # reruns the command in the marker
    assert doc.read_text().count("<!-- end generated: tiny -->") == 1  # replaced, not added


def test_hung_run_is_killed(plugin):
    task = dict(suite="tiny", case="fit-five", mode="fit", planner="bench_hang",
                time_limit=None, seed=0, options={}, imports=[plugin], run=0)
    result = run_task(task, timeout=10)  # a loaded machine imports memplan slowly
    assert result["status"] == "TIMEOUT"
    assert result["buffers"] == 5 and result["lower_bound"] == 12  # known before planning


def test_network_like_is_seeded_and_exact():
    a, b = network_like(500, seed=3), network_like(500, seed=3)
    assert len(a) == 500
    for name in ("sizes", "starts", "ends", "alignments"):
        assert np.array_equal(getattr(a, name), getattr(b, name))
    assert not np.array_equal(a.sizes, network_like(500, seed=4).sizes)
    assert (a.ends > a.starts).all() and (a.alignments == 64).all()
    assert (a.ends - a.starts).max() > 50  # a few long-lived buffers


def _fingerprint(problem) -> str:
    """Every field of a problem, hashed: two problems with one fingerprint are the same."""
    fields = (problem.name, problem.ids, problem.sizes.tolist(), problem.starts.tolist(),
              problem.ends.tolist(), problem.alignments.tolist(), problem.pinned.tolist(),
              problem.max_sizes.tolist(), problem.kinds, problem.allowed_regions,
              problem.aliases, problem.conflicts.tolist(), problem.capacity,
              None if problem.widths is None else problem.widths.tolist(), problem.regions,
              problem.steps)
    return hashlib.sha256(repr(fields).encode()).hexdigest()


@pytest.mark.parametrize("layers,heads,seed,int8", [(1, 2, 4, True), (2, 2, 0, False),
                                                    (2, 2, 3, True), (3, 5, 1, True)])
def test_decoder_written_directly_is_the_one_the_onnx_frontend_reads(layers, heads, seed, int8):
    model = decoder_model(layers, heads, seed=seed)
    assert any(n.op_type == "MatMulInteger" for n in model.graph.node) == int8
    read = from_onnx(model, alignment=64)
    written = decoder_problem(layers, heads, seed=seed)
    assert written.ids == read.ids and written.aliases == read.aliases
    assert written.steps == read.steps
    assert _fingerprint(written) == _fingerprint(read)


def test_decoder_10k_is_the_problem_regress_has_always_planned():
    """`large/decoder-10k` as `from_onnx(decoder_model(24, 28))` made it before the
    direct writer: the same fingerprint (and so the same arena in regress)."""
    decoder = transformer_decoder(10_000)
    assert (len(decoder), decoder.name) == (9124, "decoder-24x28-s0")
    assert _fingerprint(decoder) == \
        "a9cb5c58767d1e3dc90e778858a9189ad47a8a054f2f8bb34b1ca7fdc90aed75"


def test_conflict_problems():
    eight = eight_operators()
    assert int(eight.sizes.sum()) == 69 << 20 and len(eight.conflicts) == 15
    graph = conflict_graph(10, 0.5, seed=1)
    assert len(graph) == 10 and len(graph.conflicts) > 0
    assert fit_five().capacity == 12


def test_peers_side_by_side_on_variants(tmp_path, monkeypatch):
    from benchmarks import peers

    monkeypatch.delenv(peers.MINIMALLOC_ENV, raising=False)
    out = tmp_path / "peers"
    code = main(["peers", "--suite", "tiny", "--problem", "fit-five", "--peer",
                 "memplan,minimalloc", "--variant", "original,reversed,relabelled",
                 "--repeat", "1", "--time-limit", "5", "--out", str(out)])
    assert code == 0
    table = (out / "results.md").read_text()
    for label in ("fit-five", "fit-five-reversed", "fit-five-relabelled"):
        assert f"| {label} | 5 |" in table
    assert table.count("| fits |") == 3  # memplan fits each copy (capacity = lower bound)
    assert "MiniMalloc binary not given" in table
    rows = [json.loads(line) for line in (out / "raw.jsonl").read_text().splitlines()]
    assert {r["status"] for r in rows if r["peer"] == "minimalloc"} == {"missing"}


def test_variants_keep_the_problem():
    from benchmarks import peers
    from memplan import lower_bound

    problem = network_like(60, 2)
    for name in peers.VARIANTS:
        copy = peers.variant(problem, name)
        assert len(copy) == len(problem) and lower_bound(copy) == lower_bound(problem)
        assert sorted(copy.sizes.tolist()) == sorted(problem.sizes.tolist())


def test_full_checks_refuses_a_check_it_does_not_have(capsys):
    from benchmarks import full_checks

    with pytest.raises(SystemExit):
        full_checks.main(["--check", "no-such-check"])
    assert "explain-cores" in capsys.readouterr().err


def test_quality_measure_names_the_stages_and_the_long_lived_part():
    from benchmarks.quality_million import measure
    from memplan.bounds import lower_bound

    problem = network_like(3000, seed=1)
    row = measure(problem, 3.0, long_share=0.05, alone=1.0)
    long = int(((problem.ends - problem.starts) > 0.05 * problem.ends.max()).sum())
    assert row["buffers"] == 3000 and row["long"] == long > 0
    assert 0 <= row["long_share_of_bound"] <= 1
    assert row["ratio"] >= 1.0 and row["heuristic"]["ratio"] >= row["ratio"]
    assert min(row["heuristic"]["passes"].values()) * lower_bound(problem) >= lower_bound(problem)
    assert row["long_alone"]["ratio"] >= 1.0
    assert row["status"] in ("optimal", "feasible")
