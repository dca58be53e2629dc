"""mkdocs hook: the command-line reference, generated from memplan's own argument parser.

`reference/cli.md` holds the marker below; at build time it becomes ``memplan -h`` and
every command's ``-h`` (100 columns wide), so the page is always the parser's own text.
`tests/test_docs.py` checks that every command is on it.
"""

from __future__ import annotations

import argparse
import os

MARKER = "<!-- generated: memplan -h, every command's -h -->"


def cli_reference() -> str:
    """Markdown: one section per command, its help as the parser prints it."""
    from memplan.cli import build_parser

    before = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"  # argparse wraps to the terminal: fix the width
    try:
        parser = build_parser()
        commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parts = ["## memplan", "", "```text", parser.format_help().rstrip(), "```"]
        for name, command in commands.choices.items():
            parts += ["", f"## memplan {name}", "", "```text", command.format_help().rstrip(),
                      "```"]
    finally:
        if before is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = before
    return "\n".join(parts)


def on_page_markdown(markdown: str, **kwargs) -> str:
    """mkdocs event: put the generated reference where the marker is."""
    return markdown.replace(MARKER, cli_reference()) if MARKER in markdown else markdown
