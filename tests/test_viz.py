"""The plots draw what the plan says: rectangles at the offsets, the right lines, the bars."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

import memplan  # noqa: E402
from memplan import Alias, Buffer, Plan, Problem, validate, viz  # noqa: E402
from memplan.problem import Step  # noqa: E402

#   address (KiB)
#     7 +               +-----+--+
#       |        +--+   |  b  |d |     v aliases a (delta 0): hatched, over a's bytes
#     4 +--------+c-+---+--+--+--+
#       |   a        :  v   |
#     0 +--------+--+--+--+-+------> time
#       0  1  2  3  4  5  6  7


@pytest.fixture
def toy() -> tuple[Problem, Plan]:
    buffers = [Buffer("a", 4096, 0, 3), Buffer("b", 2048, 3, 6), Buffer("c", 2048, 1, 2),
               Buffer("v", 4096, 2, 5), Buffer("d", 1024, 4, 7)]
    problem = Problem(buffers, aliases=[Alias("a", "v")], name="toy")
    plan = Plan.from_offsets(problem, [0, 4096, 4096, 0, 6144], planner="hand")
    assert validate(problem, plan) == []
    yield problem, plan
    plt.close("all")


def _boxes(collection) -> list[tuple[float, float, float, float]]:
    """(x0, y0, x1, y1) of every polygon of a PolyCollection."""
    return sorted((*path.vertices.min(0), *path.vertices.max(0))
                  for path in collection.get_paths())


def test_layout_draws_one_rectangle_per_buffer_at_its_offset(toy, tmp_path):
    problem, plan = toy
    ax = viz.plot_layout(problem, plan)
    plain, shared = ax.collections
    expected = sorted((problem.starts[i], plan.offsets[i], problem.ends[i],
                       plan.offsets[i] + problem.sizes[i]) for i in range(len(problem)))
    assert sorted(_boxes(plain) + _boxes(shared)) == expected
    assert _boxes(shared) == [(2, 0, 5, 4096)]  # the alias target, drawn apart (hatched)
    assert shared.get_hatch() == "//"
    labels = [line.get_label() for line in ax.get_lines()]
    assert labels == ["arena size 7 KiB", "lower bound 7 KiB"]
    assert ax.get_ylabel() == "address (KiB)"
    assert {t.get_text() for t in ax.texts} == {"a", "b", "c", "v", "d"}
    ax.figure.savefig(tmp_path / "layout.png")
    assert (tmp_path / "layout.png").stat().st_size > 1000


def test_layout_marks_capacity_and_proven_bound(toy):
    problem, plan = toy
    problem = problem.replace(capacity=8192)
    plan = Plan.from_offsets(problem, plan.offsets + np.array([0, 1024, 1024, 0, 1024]),
                             planner="hand", best_bound=7680)
    ax = viz.plot_layout(problem, plan, labels=False)
    values = {line.get_label().split(" ")[0]: line.get_ydata()[0] for line in ax.get_lines()}
    assert values == {"arena": 8192, "lower": 7168, "proven": 7680, "capacity": 8192}
    assert not ax.texts


def test_plan_usage_is_the_highest_top_per_step(toy):
    problem, plan = toy
    expected = [max((plan.offsets[i] + problem.sizes[i] for i in range(len(problem))
                     if problem.starts[i] <= t < problem.ends[i]), default=0)
                for t in range(problem.horizon)]
    assert viz.plan_usage(problem, plan).tolist() == expected


def test_memory_plot_shows_live_bytes_usage_and_arena(toy):
    problem, plan = toy
    ax = viz.plot_memory(problem, plan)
    labels = [line.get_label() for line in ax.get_lines()]
    assert labels == ["highest address the plan uses", "arena 7 KiB", "lower bound 7 KiB"]
    assert ax.get_ylim()[1] >= plan.arena_size


def test_comparison_bars_are_arena_over_lower_bound():
    table = pd.DataFrame({"problem": ["x", "x", "y", "y"], "planner": ["greedy", "exact"] * 2,
                          "arena_size": [110, 100, 130, 120], "lower_bound": [100] * 4})
    ax = viz.plot_comparison(table)
    heights = sorted(round(bar.get_height(), 6) for bar in ax.patches)
    assert heights == [1.0, 1.1, 1.2, 1.3]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["greedy", "exact"]
    ax = viz.plot_comparison(table, planners=["exact"])
    assert len(ax.patches) == 2


def test_human_bytes():
    assert viz.human_bytes(3 << 20) == "3 MiB"
    assert viz.human_bytes(1536) == "1.5 KiB"
    assert viz.human_bytes(12) == "12 B"


def test_large_layouts_lose_their_edges_and_are_rasterised():
    rng = np.random.default_rng(0)
    starts = rng.integers(0, 200, viz.EDGE_LIMIT + 1)
    problem = Problem.from_arrays(rng.integers(1, 64, len(starts)), starts,
                                  starts + rng.integers(1, 20, len(starts)))
    plan = memplan.plan_with("greedy_by_size", problem)
    assert validate(problem, plan) == []
    collection, = viz.plot_layout(problem, plan).collections
    assert collection.get_rasterized() and not collection.get_linewidths().any()
    small = problem.replace(buffers=list(problem.buffers)[:50])
    plan = memplan.plan_with("greedy_by_size", small)
    assert validate(small, plan) == []
    collection, = viz.plot_layout(small, plan).collections
    assert not collection.get_rasterized() and collection.get_linewidths().all()


def test_window_and_addresses_draw_what_reaches_into_them(toy):
    problem, plan = toy
    ax = viz.plot_layout(problem, plan, window=(3, 6), addresses=(4096, 7168))
    drawn = sorted(_boxes(ax.collections[0]))
    assert drawn == [(3, 4096, 6, 6144), (4, 6144, 7, 7168)]  # b and d; a, c and v end lower
    assert ax.get_xlim() == (3, 6) and ax.get_ylim() == (4096, 7168)


def test_colour_by_kind_and_by_operator():
    steps = [Step("in", "Input", (), ("x",)), Step("c1", "Conv", ("x",), ("y",)),
             Step("r1", "Relu", ("y",), ("z",))]
    problem = Problem([Buffer("x", 64, 0, 2, kind="input"), Buffer("y", 128, 1, 3),
                       Buffer("z", 32, 2, 3, kind="output")], steps=steps)
    plan = memplan.plan_with("greedy_by_size", problem)
    assert validate(problem, plan) == []

    def legend(ax):
        return [t.get_text() for t in ax.get_legend().get_texts()][2:]  # after the two lines

    assert legend(viz.plot_layout(problem, plan, colour="kind")) == ["activation", "input",
                                                                     "output"]
    assert legend(viz.plot_layout(problem, plan, colour="operator")) == ["Conv", "Input", "Relu"]
    with pytest.raises(ValueError, match="no operators"):
        viz.plot_layout(problem.replace(steps=None), plan, colour="operator")


def test_solve_plots_a_window_coloured_by_kind(tmp_path):
    from memplan.cli import main

    path = tmp_path / "layout.svg"
    assert main(["solve", "--plot", str(path), "--window", "10:30", "--addresses", "0:2MiB",
                 "--colour", "kind", "--quiet"]) == 0
    assert path.stat().st_size > 5000
