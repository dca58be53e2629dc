"""Seeded memory traces of the shape production ML compilers write for training and inference.

Compilers that plan a whole training step (XLA, for instance) hand the
planner a trace unlike a network's schedule: a few hundred buffers live over
most of the step (weights, optimiser state: sizes up to hundreds of MB) and
thousands of short activations around them (median lifetime 4-6 steps),
plus the activations saved for the backward pass, which nest (the first
saved is the last read). Every long-lived buffer meets every other buffer,
and every saved activation every other saved one: 10 M+ pairs overlap in
time at 10k-60k buffers, more than pair lists can hold::

    address
      ^  .. short activations (4-6 steps), workspaces (1 step) ..........
      |  saved activations: nested, [k, 2F - k)    +-----------+
      |                          +-----------------+-----------+-------+
      |  weight gradients                          [b, T)      +-------+
      |  weights, optimiser state m, v: [0, T) ------------------------+
      +-------------------------------------------------------------> steps
           forward (F steps)        backward (F steps)     optimiser

- `training_step_trace`: forward, backward, optimiser (the figure);
- `inference_trace`: the forward pass only: weights over every step, the
  activations around them, nothing saved;
- `TRACES`: the named set the benchmarks plan, sized like the production
  traces these stand for (BERT-large 10.7k buffers, a 2.6B transformer 18.7k,
  a 13B transformer 14.7k with more parameter tensors, an operator graph of
  62k), two seeds of the common sizes so that nothing is tuned on one instance;
- `tiled`: copies of a trace laid end to end in time (steps after steps), as a
  compiler that plans several steps or requests at once writes them: the copies
  never meet, so the live-load bound is one copy's.

Same arguments, same problem on every machine (Python's `random.Random`);
the buffer count lands within a few percent of the one asked. O(n).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from functools import partial

import numpy as np

from memplan.problem import Problem

MIB = 1 << 20
ALIGNMENT = 64
LONG_LIVED = 250  # parameter tensors: each has a weight, two optimiser moments, a gradient
SAVED = 0.03  # chance that a forward operator saves a tensor for the backward pass (checkpoints)
WORKSPACE = 0.2  # chance that an operator has a one-step workspace


class _Trace:
    """Buffers as they are written: parallel lists of size, start, end."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.sizes: list[int] = []
        self.starts: list[int] = []
        self.ends: list[int] = []

    def buffer(self, size: int, start: int, end: int) -> None:
        self.sizes.append(max(ALIGNMENT, -(-size // ALIGNMENT) * ALIGNMENT))
        self.starts.append(start)
        self.ends.append(max(end, start + 1))

    def short_life(self) -> int:
        """Steps an activation lives: lognormal, median 5."""
        return max(1, round(self.rng.lognormvariate(math.log(5), 0.6)))

    def activation(self) -> int:
        """Bytes of an activation: tokens x width x dtype, 2-64 MB mostly."""
        rng = self.rng
        return rng.choice((2048, 4096, 8192)) * rng.choice((1024, 2048, 2560, 4096, 10240)) \
            * rng.choice((2, 2, 4)) // rng.choice((1, 1, 2, 4))

    def parameter(self) -> int:
        """Bytes of a weight: heavy-tailed, median 8 MB, up to 400 MB (embeddings)."""
        return min(400 * MIB, int(self.rng.lognormvariate(math.log(8 * MIB), 1.2)))

    def forward(self, steps: int, *, save: bool) -> None:
        """``steps`` operators: each writes a short activation, sometimes a workspace, and
        (``save``) sometimes a tensor kept until its backward operator, step 2 steps - k."""
        for k in range(steps):
            self.buffer(self.activation(), k, k + self.short_life())
            if self.rng.random() < WORKSPACE:
                self.buffer(self.activation() // 4, k, k + 1)
            if save and self.rng.random() < SAVED:
                self.buffer(self.activation(), k, 2 * steps - k)

    def problem(self, name: str) -> Problem:
        count = len(self.sizes)
        return Problem.from_arrays(np.array(self.sizes, np.int64),
                                   np.array(self.starts, np.int64),
                                   np.array(self.ends, np.int64),
                                   alignments=np.full(count, ALIGNMENT, np.int64), name=name)


def training_step_trace(buffers: int, seed: int = 0, long_lived: int = LONG_LIVED) -> Problem:
    """A training step of about ``buffers`` buffers (10k-60k: see the module doc).

    Steps: ``long_lived`` weights and their two optimiser moments, live over
    the whole step; forward operators (`_Trace.forward`, saving tensors);
    backward operators in reverse, each writing a short gradient, sometimes a
    workspace, and for a parameter its weight gradient, live until the
    optimiser's end; the optimiser, one short temporary per parameter.
    """
    trace = _Trace(seed)
    per_step = 1 + WORKSPACE + SAVED + 1 + WORKSPACE  # buffers per forward + backward step
    steps = max(8, round((buffers - 5 * long_lived) / per_step))
    end = 2 * steps + long_lived
    weights = [trace.parameter() for _ in range(long_lived)]
    for size in weights:
        trace.buffer(size, 0, end)  # the weight
        trace.buffer(2 * size, 0, end)  # optimiser moments, float32
        trace.buffer(2 * size, 0, end)
    trace.forward(steps, save=True)
    owner = sorted(trace.rng.sample(range(steps, 2 * steps), long_lived))
    for k in range(steps, 2 * steps):
        trace.buffer(trace.activation(), k, k + trace.short_life())
        if trace.rng.random() < WORKSPACE:
            trace.buffer(trace.activation() // 4, k, k + 1)
    for parameter, k in enumerate(owner):  # weight gradients: until their update
        trace.buffer(weights[parameter], k, 2 * steps + parameter + 1)
        trace.buffer(weights[parameter] // 2, 2 * steps + parameter, 2 * steps + parameter + 1)
    return trace.problem(f"training-trace-{len(trace.sizes)}-s{seed}")


def inference_trace(buffers: int, seed: int = 0) -> Problem:
    """A forward pass of about ``buffers`` buffers: ``LONG_LIVED`` weights live over every
    step, the activations and workspaces around them, nothing saved."""
    trace = _Trace(seed)
    steps = max(8, round((buffers - LONG_LIVED) / (1 + WORKSPACE)))
    for _ in range(LONG_LIVED):
        trace.buffer(trace.parameter(), 0, steps + 1)
    trace.forward(steps, save=False)
    return trace.problem(f"inference-trace-{len(trace.sizes)}-s{seed}")


def tiled(problem: Problem, copies: int) -> Problem:
    """``copies`` copies of ``problem`` one after the other in time; O(copies x n)."""
    span = int(problem.ends.max()) if len(problem) else 0
    shift = np.repeat(np.arange(copies, dtype=np.int64) * span, len(problem))
    return Problem.from_arrays(np.tile(problem.sizes, copies),
                               np.tile(problem.starts, copies) + shift,
                               np.tile(problem.ends, copies) + shift,
                               alignments=np.tile(problem.alignments, copies),
                               name=f"{problem.name}-x{copies}")


TRACES: dict[str, Callable[[], Problem]] = {
    "training-10k": partial(training_step_trace, 10_000),
    "training-10k-s1": partial(training_step_trace, 10_000, 1),
    "training-15k-state": partial(training_step_trace, 15_000, 0, 3 * LONG_LIVED),
    "training-18k": partial(training_step_trace, 18_000),
    "training-18k-s1": partial(training_step_trace, 18_000, 1),
    "training-30k": partial(training_step_trace, 30_000),
    "training-30k-s2": partial(training_step_trace, 30_000, 2),
    "training-60k": partial(training_step_trace, 60_000),
    "inference-30k": partial(inference_trace, 30_000),
    "inference-60k": partial(inference_trace, 60_000),
}
