"""Tensors computed from constants alone at run time: what folding them at export would save.

Why: at real width one such tensor can be the arena. ExecuTorch's llama
example without a delegate transposes its 2048 x 32000 output projection
(``permute_copy``) at every call into a 250 MiB buffer, 97 % of the arena;
every planner is at the bound, and no offset can help. Done once at export
(the weight stored transposed), the tensor becomes a constant and leaves the
arena.

Steps (`foldable`), on the problem's ``steps`` (the frontend must fill
``Step.constants``, and list every other value a step reads in ``reads``):

- walk the steps in order: a step that reads at least one constant or buffer,
  and nothing but constants and buffers already known to be computed from
  constants, computes its buffers from constants too (a chain: permute, then
  a dtype conversion...). A buffer written by another step as well, a
  graph input or output, is never one; a buffer bound by a mandatory alias to
  one of them (a static view) is one when no step writes it;
- the tensors to fold are those of them read by a step that still runs (one
  that also reads something else, or writes a buffer that is no such tensor):
  what the program would store instead. Each comes with the buffers computing
  it (and, for a static view, its base) that no other such tensor needs;
- the saving is measured, never guessed: `memplan.bounds.lower_bound` of the
  problem without those buffers (`memplan.diagnosis.capacity_reason.subproblem`),
  for each tensor and for all of them together.

The program stores each folded tensor as a constant: in place of the constants
it is computed from when no other step reads them (a weight read only by its
transpose is stored transposed instead), besides them when a step that still
runs reads them too (``kept``). Cost: O(steps x their names) for the walk, one
lower bound per folded tensor and one for all.
"""

from __future__ import annotations

import numpy as np

from memplan.bounds import lower_bound
from memplan.diagnosis.capacity_reason import subproblem
from memplan.diagnosis.explanation import Folding, Operator
from memplan.diagnosis.what_if import producers_and_readers
from memplan.problem import Problem


def computed_from_constants(problem: Problem) -> dict[str, int]:
    """Per buffer computed from constants alone at run time, the step computing it."""
    steps = problem.steps or ()
    writers: dict[str, int] = {}
    for step in steps:
        for name in step.writes:
            writers[name] = writers.get(name, 0) + 1
    index, kinds = problem._index, problem.kinds
    root = problem.alias_groups[0]
    groups: dict[int, list[str]] = {}  # alias groups of two buffers or more: a loop over
    for idx in np.flatnonzero(np.bincount(root)[root] > 1).tolist():  # them, not over all
        groups.setdefault(int(root[idx]), []).append(problem.ids[idx])

    def held(name: str) -> bool:  # a graph input or output: the run gives or takes it
        return kinds[index[name]] in ("input", "output")

    derived: dict[str, int] = {}
    for t, step in enumerate(steps):
        if not (step.constants or step.reads) or not step.writes \
                or any(name not in derived for name in step.reads):
            continue
        for name in step.writes:
            if name not in index or writers[name] > 1 or held(name):
                continue
            derived[name] = t
            group = groups.get(int(root[index[name]]), [name])
            if [m for m in group if m in writers] == [name]:  # it, and static views of it
                derived.update((view, t) for view in group if view != name and not held(view))
    return derived


def foldable(problem: Problem, *, bound: int | None = None
             ) -> tuple[tuple[Folding, ...], int | None]:
    """The tensors to fold at export, largest first (see the module docstring), and the
    lower bound with all of them folded (None when there is none)."""
    derived = computed_from_constants(problem)
    if not derived:
        return (), None
    steps = problem.steps or ()
    bound = lower_bound(problem) if bound is None else bound
    readers = producers_and_readers(problem)[1]
    index, root = problem._index, problem.alias_groups[0]
    shared: dict[int, list[str]] = {}  # alias group -> its buffers computed from constants
    for name in derived:
        shared.setdefault(int(root[index[name]]), []).append(name)
    export_time = {t for t in set(derived.values())  # steps that would run at export
                   if all(w in derived for w in steps[t].writes if w in index)}
    needs: dict[str, set[str]] = {}  # buffer computed from constants -> folded tensors using it
    folded = []
    for name in sorted(derived, key=lambda n: (-int(problem.sizes[index[n]]), n)):
        if all(t in export_time for t in readers.get(name, ())):
            continue  # read only on the way to another folded tensor (or never)
        folded.append(name)
        stack, seen = [name], {name}
        while stack:
            member = stack.pop()  # what computes it, and the base a static view lives in
            for read in [*steps[derived[member]].reads, *shared[int(root[index[member]])]]:
                if read in derived and read not in seen:
                    seen.add(read)
                    stack.append(read)
        for member in seen:
            needs.setdefault(member, set()).add(name)
    records = []
    running = {c for t, step in enumerate(steps) if t not in export_time for c in step.constants}
    for name in folded:
        own = sorted(member for member, users in needs.items() if users == {name})
        chain = sorted({derived[member] for member in own})
        constants = tuple(dict.fromkeys(c for t in chain for c in steps[t].constants))
        without = _bound_without(problem, own)
        operators = tuple(Operator(t, steps[t].name, steps[t].op) for t in chain)
        records.append(Folding(name, int(problem.sizes[problem.index(name)]), operators,
                               constants, tuple(c for c in constants if c in running),
                               tuple(own), without, bound - without))
    return tuple(records), _bound_without(problem, list(derived))


def _bound_without(problem: Problem, names: list[str]) -> int:
    """The lower bound of ``problem`` with the buffers ``names`` left out."""
    gone = {problem.index(name) for name in names}
    return lower_bound(subproblem(problem, [i for i in range(len(problem)) if i not in gone],
                                  None))
