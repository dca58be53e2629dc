"""The HTML view's own script, run: its page painted and used as a reader would.

The page (`memplan.viz_html`) is one file whose script, ``memplan/data/plan_view.js``,
draws the plans and answers the mouse. Here that script runs in V8 (the `mini-racer`
wheel: no browser to install), over a document of the test's own, ``page_dom.js``: the
page's markup parsed, the elements, events and animation frames the script uses, and a
canvas that keeps the pixels the script writes. The page must paint without an error
and without reaching for the network, show a buffer's tensor name and size when the
pointer is over it, change the visible range when the wheel zooms, find a tensor by
name, colour by operator, and open on the plan its address names.

What this does not see is a browser's own rendering (fonts, CSS); the page's first
paint in a real Chromium at 10k-100k buffers is measured by `benchmarks.view_bench`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from py_mini_racer import MiniRacer

from memplan import api, plan_with, validate
from memplan.viz_html import page as page_of
from memplan.viz_html import to_html

DOM = (Path(__file__).parent / "page_dom.js").read_text(encoding="utf-8")


class Page:
    """One page's script running in its own V8 context; `value` reads JavaScript."""

    def __init__(self, html: str, address: str = ""):
        self.engine = MiniRacer()
        self.engine.eval(DOM)
        self.run(f"openPage({json.dumps(html)}, {json.dumps(address)})")

    def value(self, expression: str):
        return json.loads(self.engine.eval(f"JSON.stringify({expression})"))

    def run(self, statement: str) -> None:
        self.engine.eval(f"{statement}; undefined")

    def text(self, selector: str) -> str:
        return self.value(f"document.body.querySelector({json.dumps(selector)}).textContent")

    def close(self) -> None:
        self.engine.close()


@pytest.fixture(scope="module")
def squeezenet():
    problem = api.load(api.default_model())
    first, other = plan_with("greedy_by_breadth", problem), plan_with("best", problem)
    assert validate(problem, first) == [] and validate(problem, other) == []
    return problem, first, other


@pytest.fixture(scope="module")
def html(squeezenet):
    problem, first, other = squeezenet
    return to_html(problem, first, other_plan=other)


@pytest.fixture(scope="module")
def view(html):
    """The page of two plans of the bundled model, open."""
    page = Page(html)
    assert page.value("window.memplanView.firstPaint") is not None
    yield page
    page.close()


def test_the_page_paints_without_errors_or_network(view, html):
    assert view.value("page.errors") == [] and view.value("page.requests") == []
    code = re.sub(r"<script type='application/json'.*?</script>", "", html, flags=re.S)
    assert not re.search(r"\b(?:src|href)\s*=|url\(|@import", code)  # nothing to load
    assert view.value("document.body.querySelectorAll('canvas').length") == 3
    painted = view.value("document.body.querySelectorAll('canvas').map(painted)")
    width, height = view.value("[...document.body.querySelectorAll('canvas')]"
                               ".map(c => [c.width, c.height])")[0]
    assert painted[0] > width * height // 10 and painted[1] > width * height // 10  # plans
    labels = view.value("document.body.querySelectorAll('div.label').map(l => l.textContent)")
    assert labels[0].startswith("greedy_by_breadth: arena") and "live bytes" in labels[2]


def test_hovering_a_buffer_shows_its_tensor_name_and_size(view, squeezenet):
    problem, first, _ = squeezenet
    i = int(problem.sizes.argmax())
    x, y = view.value(f"memplanView.pointOf({i}, 0)")
    view.run(f"dispatch(document.body.querySelector('canvas'), 'pointermove', "
             f"{{clientX: {x}, clientY: {y}}})")
    assert view.value("document.getElementById('tip').style.display") == "block"
    text = view.text("#tip")
    assert problem.ids[i] in text and f"{int(problem.sizes[i]):,} B" in text
    assert f"{int(first.offsets[i]):,} B" in text and "producer" in text
    view.run("dispatch(document.body.querySelector('canvas'), 'pointerleave')")
    assert view.value("document.getElementById('tip').style.display") == "none"
    assert view.value("page.errors") == []


def test_the_wheel_zooms_the_visible_range(view):
    view.run("memplanView.reset(); frames()")
    before = view.text(".range")
    span = view.value("memplanView.view.t1 - memplanView.view.t0")
    view.run("dispatch(document.body.querySelector('canvas'), 'wheel', "
             "{clientX: 640, clientY: 150, deltaY: -600})")  # wheel up: zoom in
    assert view.value("memplanView.view.t1 - memplanView.view.t0") < span / 2
    assert view.text(".range") != before
    assert view.value("page.errors") == []


def test_search_finds_a_tensor_by_name(view, squeezenet):
    problem = squeezenet[0]
    name = problem.ids[len(problem) // 2]
    view.run(f"document.getElementById('find').value = {json.dumps(name)}")
    view.run("dispatch(document.getElementById('find'), 'keydown', {key: 'Enter'})")
    assert f"showing {name}" in view.text(".found")
    shown = view.value("memplanView.view")
    i = problem.index(name)
    assert shown["t0"] <= problem.starts[i] and problem.ends[i] <= shown["t1"]
    assert view.value("page.errors") == []


def test_colour_by_operator_and_the_legend(view):
    view.run("const colour = document.getElementById('colour'); colour.value = 'operator'; "
             "dispatch(colour, 'change')")
    legend = view.text("#legend")
    assert "Conv" in legend and "Relu" in legend
    view.run("colour.value = 'kind'; dispatch(colour, 'change')")
    assert "activation" in view.text("#legend")
    assert view.value("page.errors") == []


def test_a_page_of_three_plans_opens_on_the_one_its_address_names(squeezenet):
    problem, first, other = squeezenet
    page = Page(page_of(problem, {"one": first, "two": other, "three": first}), "#plan=two")
    try:
        labels = "document.body.querySelectorAll('div.label').map(l => l.textContent)"
        assert page.value(labels)[0].startswith("two:")
        assert page.value(labels)[1].startswith("one:")
        assert page.value("document.body.querySelectorAll('select.pick')[0].value") == "1"
        page.run("const pick = document.body.querySelectorAll('select.pick')[1]; "
                 "pick.value = '2'; dispatch(pick, 'change')")  # plan B: the third
        assert page.value(labels)[1].startswith("three:")
        assert page.value("page.errors") == []
    finally:
        page.close()


def test_an_error_in_the_script_is_seen(squeezenet):
    problem, first, _ = squeezenet
    broken = to_html(problem, first).replace("const D = JSON.parse", "const D = JSON.parsed")
    page = Page(broken)
    try:
        assert "JSON.parsed is not a function" in " ".join(page.value("page.errors"))
    finally:
        page.close()
