"""A sweep's plans on disk, and one interactive page per model shape for the report.

The client of a sweep holds rows only. To put the plan of any row one click
away, each task can write its plan where it runs (`save_plan`, called by
`memplan.sweeps.sweep_tasks.run_task` when the sweep is given a ``plans``
folder): memplan JSON offsets by buffer id, named by a hash of the task's key,
with what rebuilds its problem (model path, dimensions, batch, alignment,
capacity). A few bytes a buffer; never the problem itself.

`write_plan_pages` then groups the plan files by model shape, loads each
shape's problem once (as the worker did), validates every plan against it,
and writes one `memplan.viz_html` page per shape holding all its plans (any
two side by side, chosen on the page): the report links each row to
``shape.html#plan=<title>``. The size stays bounded: one problem per shape
plus 8-12 bytes per buffer per plan, and no page for shapes past
`MAX_PAGE_BUFFERS` buffers. Cost: a load and a validation per shape and plan.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

from memplan.errors import MemplanError
from memplan.formats.memplan_json import plan_from_dict, plan_to_dict
from memplan.output_files import open_replacing
from memplan.plan import fits
from memplan.validate import validate
from memplan.viz import human_bytes
from memplan.viz_html import page

MAX_PAGE_BUFFERS = 200_000  # no plan page for larger problems (a page of ~10 MB)


def plan_file(folder: str | os.PathLike, key: str) -> Path:
    """Where the plan of the task ``key`` is kept."""
    return Path(folder) / f"{hashlib.sha1(key.encode()).hexdigest()[:20]}.json"


def save_plan(folder: str, task, problem, plan) -> None:
    """Write ``plan`` of ``task`` (a `memplan.sweeps.sweep_tasks.Task`) into ``folder``:
    written whole, then renamed (a reader never sees half a file). A file that cannot be
    written costs the row its view link, never its result."""
    document = plan_to_dict(problem, plan)
    document["task"] = {"key": task.key, "path": task.path, "dims": list(map(list, task.dims)),
                        "batch": task.batch, "alignment": dict(task.settings).get("alignment"),
                        "capacity": problem.capacity, "planner": task.planner}
    path = plan_file(folder, task.key)
    partial = path.with_name(f"{path.name}.{os.getpid()}.part")
    try:
        partial.write_text(json.dumps(document), encoding="utf-8")
        os.replace(partial, path)
    except OSError:
        partial.unlink(missing_ok=True)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", text).strip("_")[:80] or "model"


def write_plan_pages(keys: list[str], folder: str | os.PathLike, pages: str | os.PathLike,
                     load: Callable[[dict[str, Any]], Any]) -> dict[str, str]:
    """One page per model shape into ``pages``, for the tasks ``keys`` whose plans are in
    ``folder``; the link of each task (relative to ``pages``' parent), by key. ``load``
    gives the problem of a plan file's ``task`` entry (as the worker loaded it). A plan
    that is missing, stale (its model changed) or invalid gets no link."""
    shapes: dict[tuple, list[dict]] = defaultdict(list)
    for key in keys:
        path = plan_file(folder, key)
        if not path.exists():
            continue
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
            task = document["task"]
            shape = (task["path"], json.dumps(task["dims"]), task["batch"], task["alignment"])
        except (OSError, ValueError, KeyError, TypeError):
            continue  # not a plan this module wrote (cut short, or edited): no view

        shapes[shape].append(document)
    pages = Path(pages)
    pages.mkdir(parents=True, exist_ok=True)
    links: dict[str, str] = {}
    for (path, dims, batch, _), documents in shapes.items():
        try:
            problem = load(documents[0]["task"])
        except (MemplanError, OSError):
            continue  # the model is gone or no longer reads: no view
        if len(problem) > MAX_PAGE_BUFFERS:
            continue
        plans, titles = {}, {}
        for document in documents:
            task = document["task"]
            shaped = problem.replace(capacity=task["capacity"])
            try:
                plan = plan_from_dict(document, shaped)
            except MemplanError:
                continue  # a stale plan: the model changed since the sweep
            if any(not (v.kind == "capacity" and not fits(plan)) for v in validate(shaped, plan)):
                continue
            capacity = task["capacity"]
            title = task["planner"] + ("" if capacity is None else f" @ {human_bytes(capacity)}")
            plans[title], titles[task["key"]] = plan, title
        if not plans:
            continue
        bindings = [("batch", batch)] * (batch is not None) + json.loads(dims)
        shape = " ".join([Path(path).stem, ",".join(f"{k}={v}" for k, v in bindings)]).strip()
        name = f"{_slug(shape)}-{hashlib.sha1(repr((path, dims, batch)).encode()).hexdigest()[:6]}"
        with open_replacing(pages / f"{name}.html", "w", encoding="utf-8") as handle:
            handle.write(page(problem.replace(capacity=None), plans,
                              title=f"{shape}: {len(problem):,} buffers"))
        links.update({key: f"{pages.name}/{name}.html#plan={quote(title)}"
                      for key, title in titles.items()})
    return links


__all__ = ["MAX_PAGE_BUFFERS", "plan_file", "save_plan", "write_plan_pages"]
