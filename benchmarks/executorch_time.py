"""``to_executorch`` seconds with ExecuTorch's default pass (greedy) and with memplan's.

Each program is exported once; then, in one process, it is lowered ``--rounds``
times with each pass, alternating (greedy first in even rounds, memplan first in
odd ones), each on a fresh deep copy (the copy is not timed). Prints per program
the median seconds of each, their ratio, memplan's planning and checking seconds
(`GraphReport.seconds`, ``verify_seconds``) and both arenas::

    PYTHONPATH=. python -m benchmarks.executorch_time                 # both programs
    PYTHONPATH=. python -m benchmarks.executorch_time --rounds 5 x24  # names containing x24

The programs (ExecuTorch's llama example, `benchmarks.executorch_zoo.llama`):

- ``llama d256 x24``: 24 layers, dim 256, 4 heads, vocab 512, 128 tokens;
- ``llama-3.2-1b shape x16``: Llama-3.2-1B's decoder, 16 layers, dim 2048,
  grouped-query attention 32/8, SwiGLU 8192, 128 tokens, with a 32,000-token
  vocabulary (the example's; 1B's is 128,256) and every layer holding the first
  layer's weights (the graph, its tensors and their plan are those of 16
  layers; the constants one layer's, so that it fits a 24 GiB machine).
"""

from __future__ import annotations

import statistics
import sys

from benchmarks import executorch_zoo as zoo
from benchmarks.executorch_models import arena_bytes, export, lowered

PROGRAMS = {
    "llama d256 x24": lambda: zoo.llama(256, 24, 128),
    "llama-3.2-1b shape x16": lambda: zoo.llama(2048, 16, 128, vocab=32000, heads=32,
                                                kv_heads=8, hidden=8192, shared_weights=True),
}


def measure(name: str, rounds: int, time_limit: float) -> str:
    import memplan.executorch

    edge = export(PROGRAMS[name]())
    seconds = {"greedy": [], "memplan": []}
    planned, checked, arenas = [], [], {}
    for r in range(rounds):
        for who in (("greedy", "memplan") if r % 2 == 0 else ("memplan", "greedy")):
            planning_pass = None if who == "greedy" else \
                memplan.executorch.memory_planning_pass(time_limit=time_limit)
            took, program = lowered(edge, planning_pass)
            seconds[who].append(took)
            arenas[who] = arena_bytes(program)
            if planning_pass is not None:
                planned.append(sum(r.seconds for r in planning_pass.reports))
                checked.append(sum(r.verify_seconds for r in planning_pass.reports))
            print(f"{name} round {r} {who}: {took:.1f} s", file=sys.stderr, flush=True)
    greedy, mine = (statistics.median(seconds[w]) for w in ("greedy", "memplan"))
    return (f"| {name} | {rounds} | {greedy:.1f} | {mine:.1f} | {mine / greedy:.2f} | "
            f"{statistics.median(planned):.2f} | {statistics.median(checked):.2f} | "
            f"{arenas['greedy']:,} | {arenas['memplan']:,} |")


def main(argv: list[str]) -> None:
    rounds = 3
    if "--rounds" in argv:
        k = argv.index("--rounds")
        rounds, argv = int(argv[k + 1]), argv[:k] + argv[k + 2:]
    chosen = [name for name in PROGRAMS if not argv or any(a in name for a in argv)]
    print("| program | rounds | greedy s | memplan s | memplan / greedy | memplan planning s | "
          "memplan check s | greedy bytes | memplan bytes |\n" + "|---" * 9 + "|")
    for name in chosen:
        print(measure(name, rounds, time_limit=10.0), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
