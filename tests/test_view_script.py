"""The HTML view in a real browser: headless Chromium (Debian's package), driven by playwright.

The page must paint without a console error or a network request, show a
buffer's tensor name and size when the mouse is over it, change the visible
range when the wheel zooms, and find a tensor by name. Chromium is the
system's (``/usr/bin/chromium``, or ``$MEMPLAN_CHROMIUM``; `.ci/run` installs
it), never a downloaded one.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from playwright.sync_api import sync_playwright

from memplan import api, plan_with, validate
from memplan.viz_html import page as page_of
from memplan.viz_html import to_html

CHROMIUM = os.environ.get("MEMPLAN_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]


def launch(playwright):
    """The system's Chromium, headless (see the module doc)."""
    assert Path(CHROMIUM).exists(), f"{CHROMIUM}: no Chromium (apt-get install chromium)"
    return playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)


@pytest.fixture(scope="module")
def squeezenet():
    problem = api.load(api.default_model())
    first, other = plan_with("greedy_by_breadth", problem), plan_with("best", problem)
    assert validate(problem, first) == [] and validate(problem, other) == []
    return problem, first, other


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as playwright:
        browser = launch(playwright)
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def browser_page(browser, squeezenet, tmp_path_factory):
    """The page of two plans of the bundled model, open in Chromium; and what it logged."""
    problem, first, other = squeezenet
    path = tmp_path_factory.mktemp("view") / "view.html"
    path.write_text(to_html(problem, first, other_plan=other), encoding="utf-8")
    logged: dict[str, list[str]] = {"errors": [], "requests": []}
    page = browser.new_page(viewport={"width": 1280, "height": 860})
    page.on("console", lambda m: logged["errors"].append(m.text)
            if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda error: logged["errors"].append(str(error)))
    page.on("request", lambda request: logged["requests"].append(request.url))
    page.goto(path.as_uri())
    page.wait_for_function("window.memplanView && window.memplanView.firstPaint !== null")
    yield page, logged, path
    page.close()


def test_the_page_paints_without_errors_or_network(browser_page):
    page, logged, path = browser_page
    assert logged["errors"] == []
    assert logged["requests"] == [path.as_uri()]  # nothing but the file itself
    assert page.locator("canvas").count() == 3  # two plans and the live bytes
    shot = path.with_suffix(".png")
    page.screenshot(path=str(shot))
    assert shot.stat().st_size > 20_000  # rectangles, not a blank page


def test_hovering_a_buffer_shows_its_tensor_name_and_size(browser_page, squeezenet):
    page, logged, _ = browser_page
    problem, first, _ = squeezenet
    i = int(problem.sizes.argmax())  # the largest tensor: easy to hit
    x, y = page.evaluate(f"memplanView.pointOf({i}, 0)")
    page.mouse.move(x, y)
    tip = page.locator("#tip")
    tip.wait_for(state="visible")
    text = tip.inner_text()
    assert problem.ids[i] in text and f"{int(problem.sizes[i]):,} B" in text
    assert f"{int(first.offsets[i]):,} B" in text and "producer" in text
    page.mouse.move(1, 1)
    assert logged["errors"] == []


def test_the_wheel_zooms_the_visible_range(browser_page):
    page, logged, _ = browser_page
    page.evaluate("memplanView.reset()")
    page.wait_for_timeout(100)
    before = page.locator(".range").inner_text()
    span = page.evaluate("memplanView.view.t1 - memplanView.view.t0")
    box = page.locator("canvas").first.bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.wheel(0, -600)  # wheel up: zoom in around the cursor
    page.wait_for_timeout(200)
    assert page.evaluate("memplanView.view.t1 - memplanView.view.t0") < span / 2
    assert page.locator(".range").inner_text() != before
    assert logged["errors"] == []


def test_search_finds_a_tensor_by_name(browser_page, squeezenet):
    page, logged, _ = browser_page
    problem = squeezenet[0]
    name = problem.ids[len(problem) // 2]
    page.fill("#find", name)
    page.press("#find", "Enter")
    page.wait_for_timeout(200)
    assert f"showing {name}" in page.locator(".found").inner_text()
    view = page.evaluate("memplanView.view")
    i = problem.index(name)
    assert view["t0"] <= problem.starts[i] and problem.ends[i] <= view["t1"]
    assert logged["errors"] == []


def test_colour_by_operator_and_the_legend(browser_page):
    page, logged, _ = browser_page
    page.select_option("#colour", "operator")
    page.wait_for_timeout(200)
    legend = page.locator("#legend").inner_text()
    assert "Conv" in legend and "Relu" in legend
    page.select_option("#colour", "kind")
    assert logged["errors"] == []


def test_a_page_of_three_plans_opens_on_the_one_its_address_names(browser, squeezenet,
                                                                  tmp_path):
    problem, first, other = squeezenet
    path = tmp_path / "three.html"
    path.write_text(page_of(problem, {"one": first, "two": other, "three": first}))
    page = browser.new_page()
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(path.as_uri() + "#plan=two")
    page.wait_for_function("window.memplanView && window.memplanView.firstPaint !== null")
    labels = page.locator(".panel .label").all_inner_texts()
    assert labels[0].startswith("two:") and labels[1].startswith("one:")
    assert page.locator("select.pick").first.input_value() == "1"
    page.select_option("select.pick >> nth=1", "2")  # plan B: the third
    page.wait_for_timeout(200)
    assert page.locator(".panel .label").all_inner_texts()[1].startswith("three:")
    page.close()
    assert errors == []
