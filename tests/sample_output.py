"""The output of a real ``memplan`` command, as documentation shows it.

Documentation pastes what a command prints; this renders it from the command itself,
so that a test can compare the two and a page never shows an output the software no
longer gives. Timings differ from run to run: `render` writes them as ``…`` and
`same_output` compares with them left out. A page shows a sample as a ``console``
block whose first line is the command (`console_samples` finds them)::

    ```console
    $ memplan solve --no-exact
    model           squeezenet.onnx (bundled)  (68 buffers)
    ...
    ```

Run as a script to print a command's sample (paste it, timings as they are)::

    python -m tests.sample_output memplan solve --no-exact
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import sys

from memplan.cli import main

TIMING = re.compile(r"(?<![\w.])\d+\.\d+ s\b|(?<=^seconds)(\s+)\d+\.\d+$")


def _timings_out(text: str) -> str:
    """``0.34 s`` -> ``… s``; the ``seconds  0.34`` row -> ``seconds  …``."""
    return "\n".join(TIMING.sub(lambda m: f"{m.group(1)}…" if m.group(1) else "… s", line)
                     for line in text.splitlines())


def render(command: str) -> str:
    """What ``command`` (``"memplan solve --time-limit 1"``) prints, timings as ``…``."""
    words = shlex.split(command)
    if words and words[0] == "memplan":
        words = words[1:]
    out = io.StringIO()  # what a terminal shows: the output, then any error line
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        main(words)
    return _timings_out(out.getvalue()).rstrip("\n")


def same_output(documented: str, command: str) -> bool:
    """Whether the ``documented`` sample is what ``command`` prints now (timings aside)."""
    def lines(text: str) -> list[str]:
        return [line.rstrip() for line in _timings_out(text.strip("\n")).splitlines()]

    return lines(documented) == lines(render(command))


SAMPLE = re.compile(r"^```console\n(\$ memplan [^\n]*\n.*?)^```", re.S | re.M)


def console_samples(markdown: str) -> list[str]:
    """Every ``console`` block of a page that runs memplan: its commands and outputs."""
    return [found.group(1) for found in SAMPLE.finditer(markdown)]


def session(block: str) -> list[tuple[str, str]]:
    """The ``(command, output)`` of each ``$ memplan ...`` line of a console block."""
    steps = re.split(r"^\$ (memplan[^\n]*)\n", block, flags=re.M)[1:]
    return list(zip(steps[0::2], steps[1::2], strict=True))


if __name__ == "__main__":
    print(render(" ".join(sys.argv[1:])))
