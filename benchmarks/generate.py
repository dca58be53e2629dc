"""Seeded generators of benchmark problems: network-like schedules and conflict graphs.

Real models give a few hundred buffers; the planners must also be timed at
10k and 100k. `network_like` writes problems with the shape of a network's
schedule rather than uniform random boxes, because the planners' costs depend
on that shape (how many buffers are live at once, how long they live)::

    step:  0    1    2    3    4    5    6
    x0    [=========)                          chain: read by the next op
    a1         [====)                          ...and by the Add (skip)
    a2              [====)
    add                  [====)
    feat  [==================================) long-lived (decoder input)

Same ``(n_buffers, seed)``, same problem, on every machine (Python's
`random.Random`, whose streams are stable across versions).
"""

from __future__ import annotations

import random

import numpy as np

from memplan.problem import Problem

# CNN resolution stages: (spatial side, channels); deeper stages halve the side
_LEVELS = ((112, 32), (56, 64), (28, 128), (14, 256), (7, 512))
_CHANNEL_FACTORS = (0.25, 0.5, 1, 1, 1, 2, 4)  # bottleneck squeeze and expansion
_ODD_CHANNELS = (3, 21, 80, 91, 255, 1000)  # heads: classes, boxes (sizes off the alignment)


class _Schedule:
    """Operators in schedule order; each writes a tensor and extends its inputs' lives."""

    def __init__(self, rng: random.Random, n_buffers: int):
        self.rng = rng
        self.n_buffers = n_buffers
        self.sizes: list[int] = []
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.step = 0
        self.level = 0  # index into _LEVELS

    def full(self) -> bool:
        return len(self.sizes) >= self.n_buffers

    def tensor_size(self) -> int:
        rng = self.rng
        side, channels = _LEVELS[self.level]
        if rng.random() < 0.05:
            channels = rng.choice(_ODD_CHANNELS)
        else:
            channels = max(1, int(channels * rng.choice(_CHANNEL_FACTORS)))
        dtype_bytes = 4 if rng.random() < 0.8 else 2
        return side * side * channels * dtype_bytes

    def new_buffer(self, size: int, end: int) -> int:
        self.sizes.append(size)
        self.starts.append(self.step)
        self.ends.append(end)
        return len(self.sizes) - 1

    def op(self, *inputs: int) -> int:
        """One operator at the current step: reads ``inputs``, writes one output."""
        for i in inputs:
            self.ends[i] = max(self.ends[i], self.step + 1)
        out = self.new_buffer(self.tensor_size(), self.step + 1)
        rng = self.rng
        if rng.random() < 0.1:  # workspace for this operator only
            self.new_buffer(max(64, int(self.sizes[out] * rng.uniform(0.1, 1.0))), self.step + 1)
        if rng.random() < 0.05:  # a shape tensor (int64), read a few steps later
            self.new_buffer(8 * rng.randint(1, 4), self.step + 1 + rng.randint(1, 3))
        self.step += 1
        return out

    def chain(self, x: int, length: int) -> int:
        for _ in range(length):
            x = self.op(x)
        return x

    def residual(self, x: int) -> int:
        """A residual block: a short chain, then an Add that reads the block's input."""
        y = self.chain(x, self.rng.randint(2, 3))
        return self.op(y, x)

    def branches(self, x: int) -> int:
        """Parallel branches run one after another, joined by a Concat of all of them."""
        outs = [self.chain(x, self.rng.randint(1, 3)) for _ in range(self.rng.randint(2, 4))]
        return self.op(*outs)

    def resample(self, x: int) -> int:
        """Down- or upsampling: the next stage's resolution (a U-Net walks both ways)."""
        step = self.rng.choice((-1, 1))
        self.level = min(max(self.level + step, 0), len(_LEVELS) - 1)
        return self.op(x)


def network_like(n_buffers: int, seed: int = 0, *, alignment: int = 64,
                 long_lived: float = 0.001) -> Problem:
    """A problem shaped like a network's schedule, with exactly ``n_buffers`` buffers.

    Steps:
    - one operator a step, each writing one output that lives from its step to
      one past its last reader (half-open lifetimes);
    - blocks drawn at random: residual blocks (a chain of 2-3 ops and an Add
      reading the block input: a skip connection), branch blocks (2-4 chains
      joined by a Concat, so early branches live until the join), plain chain
      segments and resolution changes;
    - tensor sizes side*side*channels*dtype from CNN stages (112x112x32 down to
      7x7x512, channels squeezed or expanded, float32 or float16), with a few
      odd head shapes (1000 classes, 255 box channels) that break the alignment;
    - some operators get a one-step workspace, some a tiny int64 shape tensor;
    - a fraction ``long_lived`` of buffers (at least 2) live for 20-80% of the
      schedule: the input, features a decoder reads much later;
    - every buffer is ``alignment``-aligned.

    O(n) time; about 1 s for 100k buffers. Names the problem
    ``network-like-<n>-s<seed>``.
    """
    rng = random.Random(seed)
    schedule = _Schedule(rng, n_buffers)
    x = schedule.new_buffer(schedule.tensor_size(), 1)  # the network input
    schedule.step = 1
    while not schedule.full():
        draw = rng.random()
        if draw < 0.5:
            x = schedule.residual(x)
        elif draw < 0.7:
            x = schedule.branches(x)
        elif draw < 0.9:
            x = schedule.chain(x, rng.randint(1, 4))
        else:
            x = schedule.resample(x)
    sizes = np.array(schedule.sizes[:n_buffers], np.int64)
    starts = np.array(schedule.starts[:n_buffers], np.int64)
    ends = np.array(schedule.ends[:n_buffers], np.int64)
    horizon = int(ends.max())
    for idx in rng.sample(range(n_buffers), min(n_buffers, max(2, int(n_buffers * long_lived)))):
        span = int(horizon * rng.uniform(0.2, 0.8))
        ends[idx] = max(ends[idx], min(horizon, starts[idx] + span))
    return Problem.from_arrays(sizes, starts, ends,
                               alignments=np.full(n_buffers, alignment, np.int64),
                               name=f"network-like-{n_buffers}-s{seed}")


def conflict_graph(n_buffers: int, density: float, seed: int = 0, *,
                   unit: int = 1 << 20) -> Problem:
    """A random conflict-graph problem: no lifetimes, each pair conflicts with ``density``.

    Sizes are 1-20 ``unit`` (MiB by default), drawn uniformly; buffers are
    named "1", "2", ... like the eight-operator example. O(n^2) pairs drawn.
    """
    rng = random.Random(seed)
    names = [str(i + 1) for i in range(n_buffers)]
    sizes = {name: rng.randint(1, 20) * unit for name in names}
    pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1:]
             if rng.random() < density]
    return Problem.from_conflicts(sizes, pairs, name=f"conflicts-{n_buffers}-d{density}-s{seed}")


def pinwheel(n_buffers: int, seed: int = 0, *, height: int = 1 << 20,
             horizon: int = 1 << 20) -> Problem:
    """A perfect tiling of time x address by nested pinwheels; capacity = ``height``.

    Every step is exactly full, so the lower bound is the capacity and the
    only fitting layout is the tiling itself (up to symmetries): adversarial
    for searches that place buffers bottom-up, since no straight cut splits a
    pinwheel::

        +-----+--------+      five pieces around a centre; the largest
        |  4  |   3    |      piece is split again the same way until
        |     +----+---+      there are n_buffers = 1 + 4k pieces
        |     | 5  |   |
        +-----+----+ 2 |
        |     1    |   |
        +----------+---+

    Seeded (`random.Random`); n_buffers is rounded down to 1 + 4k.
    """
    rng = random.Random(seed)
    pieces = [(0, horizon, 0, height)]  # (t0, t1, a0, a1)
    while len(pieces) + 4 <= n_buffers:
        pieces.sort(key=lambda p: (p[1] - p[0]) * (p[3] - p[2]))
        t0, t1, a0, a1 = pieces.pop()
        if t1 - t0 < 3 or a1 - a0 < 3:
            pieces.append((t0, t1, a0, a1))
            break
        x1, x2 = sorted(rng.sample(range(t0 + 1, t1), 2))
        y1, y2 = sorted(rng.sample(range(a0 + 1, a1), 2))
        pieces += [(t0, x2, a0, y1), (x2, t1, a0, y2), (x1, t1, y2, a1), (t0, x1, y1, a1),
                   (x1, x2, y1, y2)]
    sizes = [a1 - a0 for _, _, a0, a1 in pieces]
    return Problem.from_arrays(sizes, [p[0] for p in pieces], [p[1] for p in pieces],
                               capacity=height, name=f"pinwheel-{len(pieces)}-s{seed}")
