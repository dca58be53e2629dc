"""The HTML plan view at scale: time to first paint in headless Chromium, and screenshots.

``python -m benchmarks.view_bench [--sizes 10000,100000] [--kinds decoder,training]
[--repeat 3] [--shots DIR] [--bokeh]``

For each generated problem (`benchmarks.large`: an ONNX transformer decoder
read by the frontend, an unrolled training step), two plans
(``greedy_by_size`` and ``best``, both validated) go into one page
(`memplan.viz_html.to_html`); the page is written, then opened ``--repeat``
times in a fresh tab of the system's Chromium (Debian's ``chromium``, driven by
playwright: ``pip install playwright``, never a browser it downloads). Measured per
page, medians:

- ``page``: building the HTML in Python, and its size;
- ``first paint``: from the navigation's start to the end of the first
  frame (``performance.now()`` when the viewer's first paint ends: the data
  decoded and every panel drawn), and the wall time from ``page.goto`` to it;
- ``frame``: one zoomed frame (a wheel event, then the redraw), ms.

A screenshot of each page goes to ``--shots``. ``--bokeh`` also times the
same rectangles as one Bokeh ``quad`` glyph (WebGL output, resources inlined:
the library alternative) to its first render, for the choice of renderer.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from benchmarks.large import training_step, transformer_decoder
from memplan import plan_with, validate
from memplan.viz_html import to_html

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
KINDS = {"decoder": transformer_decoder, "training": training_step}
PAINTED = "window.memplanView && window.memplanView.firstPaint !== null"


def _label(n: int) -> str:
    return f"{n // 1000}k" if n >= 1000 else str(n)


def _plans(problem):
    plans = [plan_with("greedy_by_size", problem), plan_with("best", problem, time_limit=10)]
    for plan in plans:
        assert validate(problem, plan) == [], f"{plan.planner}: invalid plan"
    return plans


def _open(browser, path: Path, ready: str, shot: Path | None = None) -> dict:
    """One fresh tab: wall seconds to ``ready``, the page's own timings, a screenshot."""
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    began = time.perf_counter()
    page.goto(path.as_uri())
    page.wait_for_function(ready, timeout=120_000, polling=20)
    wall = time.perf_counter() - began
    result = {"wall": wall, "errors": errors}
    if ready == PAINTED:
        result["first_paint"] = page.evaluate("memplanView.firstPaint") / 1000
        box = page.locator("canvas").first.bounding_box()
        page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        page.evaluate("memplanView.frameMs = null")
        page.mouse.wheel(0, -400)
        page.wait_for_function("memplanView.frameMs !== null")
        result["frame_ms"] = page.evaluate("memplanView.frameMs")
        page.mouse.move(1, 1)
        page.evaluate("memplanView.reset()")
        page.wait_for_timeout(300)
    if shot is not None:
        page.screenshot(path=str(shot))
    page.close()
    return result


def _bokeh_page(problem, plan, path: Path) -> None:
    """The plan's rectangles as one Bokeh quad glyph (WebGL), every resource inlined."""
    from bokeh.embed import file_html
    from bokeh.models import ColumnDataSource, HoverTool
    from bokeh.plotting import figure
    from bokeh.resources import INLINE

    source = ColumnDataSource({"left": problem.starts, "right": problem.ends,
                               "bottom": plan.offsets, "top": plan.offsets + problem.sizes,
                               "id": list(problem.ids)})
    fig = figure(width=1350, height=500, output_backend="webgl",
                 tools="xwheel_zoom,wheel_zoom,pan,reset")
    fig.quad(source=source, left="left", right="right", bottom="bottom", top="top",
             line_width=0)
    fig.add_tools(HoverTool(tooltips=[("id", "@id")]))
    path.write_text(file_html(fig, INLINE, "bokeh"), encoding="utf-8")


BOKEH_READY = ("window.Bokeh && Bokeh.documents && Bokeh.documents.length > 0 && "
               "Bokeh.documents[0].is_idle")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.view_bench",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--kinds", default="decoder,training")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", default="benchmarks/results/view", help="the pages")
    parser.add_argument("--shots", default="docs/how-to/images", help="the screenshots")
    parser.add_argument("--bokeh", action="store_true", help="also time a Bokeh page")
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    out, shots = Path(args.out), Path(args.shots)
    out.mkdir(parents=True, exist_ok=True)
    shots.mkdir(parents=True, exist_ok=True)
    rows = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        for kind in args.kinds.split(","):
            for n in map(int, args.sizes.split(",")):
                problem = KINDS[kind](n)
                first, other = _plans(problem)
                began = time.perf_counter()
                html = to_html(problem, first, other_plan=other)
                built = time.perf_counter() - began
                name = f"view-{kind}-{_label(n)}"
                path = out / f"{name}.html"
                path.write_text(html, encoding="utf-8")
                runs = [_open(browser, path, PAINTED, shots / f"{name}.png" if r == 0 else None)
                        for r in range(args.repeat)]
                assert not any(r["errors"] for r in runs), runs[0]["errors"]
                row = {"problem": f"{kind}-{_label(n)}", "buffers": len(problem),
                       "steps": problem.horizon, "html_s": built, "mb": len(html) / 1e6,
                       "first_paint": statistics.median(r["first_paint"] for r in runs),
                       "wall": statistics.median(r["wall"] for r in runs),
                       "frame_ms": statistics.median(r["frame_ms"] for r in runs)}
                if args.bokeh:
                    bokeh = out / f"{name}-bokeh.html"
                    _bokeh_page(problem, first, bokeh)
                    row["bokeh_wall"] = statistics.median(
                        _open(browser, bokeh, BOKEH_READY)["wall"] for _ in range(args.repeat))
                    row["bokeh_mb"] = bokeh.stat().st_size / 1e6
                rows.append(row)
                print(row, flush=True)
        browser.close()
    columns = list(rows[0])
    print("| " + " | ".join(columns) + " |\n|" + "---|" * len(columns))
    for row in rows:
        print("| " + " | ".join(f"{v:.3g}" if isinstance(v, float) else str(v)
                                for v in row.values()) + " |")


if __name__ == "__main__":
    main()
