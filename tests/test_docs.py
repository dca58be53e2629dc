"""The documentation cannot drift from the software: its examples run, its reference is whole.

Runnable examples, the convention for every page under ``docs/`` and for ``README.md``:

- every fenced block opened with ```` ```python ```` runs; the blocks of one page run in
  order in one namespace, like the cells of a notebook, so a later block may use what an
  earlier one built;
- a block opened with ```` ```python title="not run" ```` is shown and not run (material
  prints the title above it): for what needs a cluster, a large model or minutes. Use it
  sparingly; blocks in other languages (``sh``, ``console``, ``json``, ``text``) never run;
- each page runs in a fresh temporary working directory holding ``model.onnx`` (the
  bundled SqueezeNet), ``problem.csv`` (MiniMalloc's 12-byte example) and, when the page
  names it, ``model.tflite`` (a small TFLite model; the ``tflite`` extra);
- keep examples small (small problems, time limits of a few seconds): every page's
  examples together run in well under 30 s.

Also here: every public name on the API reference (and in ``memplan.__all__``) has a
docstring, the command-line reference covers every command, and the README's
command-line example shows what the command prints today.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import memplan

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = sorted([*DOCS.rglob("*.md"), ROOT / "README.md"])
BLOCK = re.compile(r"^(?P<indent>[ \t]*)```python(?P<info>[^\n]*)\n(?P<code>.*?)^(?P=indent)```",
                   re.MULTILINE | re.DOTALL)
NOT_RUN = 'title="not run"'


def examples(page: Path) -> list[tuple[int, str]]:
    """(line, code) of each block of ``page`` that runs."""
    text = page.read_text()
    return [(text.count("\n", 0, m.start()) + 2, textwrap.dedent(m["code"]))
            for m in BLOCK.finditer(text) if NOT_RUN not in m["info"]]


def _name(page: Path) -> str:
    return str(page.relative_to(ROOT))


RUNNABLE = [page for page in PAGES if examples(page)]


def _fixtures(page: Path, where: Path) -> None:
    shutil.copy(ROOT / "memplan" / "data" / "squeezenet.onnx", where / "model.onnx")
    shutil.copy(ROOT / "benchmarks" / "data" / "minimalloc" / "example.12.csv",
                where / "problem.csv")
    if "model.tflite" in page.read_text():
        from tests.test_tflite import chain

        (where / "model.tflite").write_bytes(chain())


@pytest.mark.parametrize("page", RUNNABLE, ids=_name)
def test_examples_run(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    _fixtures(page, tmp_path)
    namespace: dict = {"__name__": "__docs__"}
    try:
        for line, code in examples(page):
            exec(compile(code, f"{_name(page)}:{line}", "exec"), namespace)
    finally:
        if "matplotlib.pyplot" in sys.modules:
            sys.modules["matplotlib.pyplot"].close("all")


def test_the_readme_python_example_prints_what_the_readme_says(tmp_path, monkeypatch, capsys):
    """The README follows its example with ``prints `...```: the line the example prints."""
    readme = ROOT / "README.md"
    said = re.search(r"^prints `([^`]*)`", readme.read_text(), re.MULTILINE)
    assert said, "README.md: the Python example's output line (prints `...`) is missing"
    monkeypatch.chdir(tmp_path)
    _fixtures(readme, tmp_path)
    namespace: dict = {"__name__": "__docs__"}
    for line, code in examples(readme):
        exec(compile(code, f"README.md:{line}", "exec"), namespace)
    assert capsys.readouterr().out.strip() == said[1]


def test_the_convention_finds_blocks_and_skips_the_marked_ones(tmp_path):
    page = tmp_path / "page.md"
    page.write_text('text\n```python\nx = 1\n```\n\n```python title="not run"\nboom()\n```\n'
                    '  ```python\n  y = x + 1\n  ```\n```sh\nmemplan solve\n```\n')
    assert examples(page) == [(3, "x = 1\n"), (10, "y = x + 1\n")]
    assert len(RUNNABLE) >= 8  # the tutorials and how-to guides carry examples


# ------------------------------------------------------------------ the API reference
def _resolve(name: str):
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for part in parts[cut:]:
            found = getattr(found, part)
        return found
    raise ImportError(name)


def _documented(obj) -> bool:
    if inspect.isclass(obj):  # a dataclass without one gets "Name(field, ...)" for free
        doc = vars(obj).get("__doc__") or ""
        return bool(doc.strip()) and not doc.startswith(f"{obj.__name__}(")
    return bool((getattr(obj, "__doc__", None) or "").strip())


def _members(obj):
    """(name, member) of what the reference renders for ``obj``: a module's public names,
    a class's own public methods and properties."""
    if inspect.ismodule(obj):
        names = getattr(obj, "__all__", None) or [
            n for n, v in vars(obj).items() if not n.startswith("_")
            and (inspect.isfunction(v) or inspect.isclass(v)) and v.__module__ == obj.__name__]
        for name in names:
            member = getattr(obj, name)
            if inspect.isclass(member) or inspect.isfunction(member):
                yield f"{obj.__name__}.{name}", member
                yield from _members(member)
    elif inspect.isclass(obj):
        for name, member in vars(obj).items():
            member = getattr(member, "__func__", member)  # classmethod, staticmethod
            if not name.startswith("_") and (inspect.isfunction(member)
                                             or isinstance(member, property)):
                yield f"{obj.__qualname__}.{name}", member


def _reference_names() -> list[str]:
    return [line[4:].strip() for page in sorted((DOCS / "reference").glob("*.md"))
            for line in page.read_text().splitlines() if line.startswith("::: ")]


def test_every_public_name_on_the_reference_has_a_docstring():
    missing = []
    for name in _reference_names():
        obj = _resolve(name)
        missing += [] if _documented(obj) else [name]
        missing += [sub for sub, member in _members(obj) if not _documented(member)]
    assert missing == [], f"public names without a docstring: {missing}"


def test_every_name_of_the_package_is_on_the_reference():
    objects = [_resolve(name) for name in _reference_names()]
    rendered = {id(obj) for obj in objects} | {id(member) for obj in objects
                                               for _, member in _members(obj)}
    absent = [name for name in memplan.__all__ if id(getattr(memplan, name)) not in rendered]
    assert absent == [], f"add to docs/reference/api.md: {absent}"


def test_the_docstring_check_sees_a_missing_one():
    class Bare:
        def method(self):
            pass

    assert not _documented(Bare) and [n for n, m in _members(Bare) if not _documented(m)]


# ------------------------------------------------------------------ the CLI reference
def test_the_cli_reference_holds_every_command():
    spec = importlib.util.spec_from_file_location("cli_reference",
                                                  DOCS / "hooks" / "cli_reference.py")
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    page = (DOCS / "reference" / "cli.md").read_text()
    assert hook.MARKER in page
    text = hook.on_page_markdown(page)
    for command in ("solve", "compare", "validate", "info", "convert", "explain", "prove",
                    "sweep"):
        assert f"## memplan {command}\n" in text and f"usage: memplan {command}" in text
    assert "--version" in text and "--time-limit" in text


# ------------------------------------------------------------------ the integrations
INTEGRATIONS = ("ONNX", "TFLite-Micro", "ExecuTorch", "TVM")  # each a frontend and a proof


def test_the_readme_docs_home_and_changelog_name_every_integration():
    for page in (ROOT / "README.md", DOCS / "index.md", ROOT / "CHANGELOG.md"):
        text = page.read_text()
        assert [name for name in INTEGRATIONS if name not in text] == [], page.name


# ------------------------------------------------------------------ the README's CLI example
_TIMES = re.compile(r"\d+(\.\d+)? s\b|(?<=^seconds)( +)\S+", re.MULTILINE)


def readme_cli_example() -> tuple[str, str]:
    """(command, output) of the README's ```console block that starts with ``$ memplan``."""
    block = re.search(r"^```console\n\$ (memplan [^\n]*)\n(.*?)^```", (ROOT / "README.md")
                      .read_text(), re.MULTILINE | re.DOTALL)
    return block[1], block[2]


def run_cli_example(command: str) -> str:
    """What ``command`` prints when run from the repository's root, as a user would."""
    args = [sys.executable, "-m", "memplan.cli", *command.split()[1:]]
    done = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_readme_cli_example_is_what_the_command_prints():
    """Timings aside, the README shows today's output; to refresh it, run
    ``python -m tests.test_docs --update`` (it rewrites the block in README.md)."""
    command, shown = readme_cli_example()
    printed = run_cli_example(command)
    assert _TIMES.sub("T", printed) == _TIMES.sub("T", shown), printed


if __name__ == "__main__":
    command, shown = readme_cli_example()
    printed = run_cli_example(command)
    if "--update" in sys.argv:
        readme = ROOT / "README.md"
        text = readme.read_text()
        readme.write_text(text.replace(f"$ {command}\n{shown}", f"$ {command}\n{printed}", 1))
    print(f"$ {command}\n{printed}", end="")
