"""Every share, margin and reserve of a time limit in the package, in one table.

A caller's limit reaches a planner as a `memplan.budget.Budget`; how a planner
or a command splits it between its stages is said here, each constant with a
line of why, so that one file answers "how much of my limit goes where".
Shares are fractions of what is left (in CPU seconds of the threads doing the
work unless said otherwise: a busy machine then takes the same decisions,
later); seconds are CPU seconds unless they say "wall". The modules that use
a constant import it by name from here. Work counts that are no time
(node limits, orders searched, pairs listed) stay beside the code they bound.
"""

# --- the clock itself (memplan.budget)
PACE_CPU = 0.005  # CPU seconds of a call before its pace (wall per CPU second) is measured
POLL_SECONDS = 0.02  # wall: how often a CP-SAT run's CPU cap (and the canonical race, and the
# fit race's joint stop) reads its clock and stop event
WATCH_SECONDS = 0.05  # wall: how often a thread waiting on a search looks at its CPU, nodes
# and Ctrl-C (the canonical head start, CP-SAT's lanes, the capacity reason's checks)
LEAST_SECONDS = 0.01  # wall: the least limit a CP-SAT run is given (the capacity reason's
# checks, the operator order's); an LNS window left less than this after its build is skipped
LEAST_LEFT = 0.05  # wall, and CPU: less left, the LNS and the order's windows start no other

# --- commands (memplan.cli): the limit counts from when memplan began to load
COMMAND_LEAST_SHARE = 0.1  # of --time-limit: what the work keeps however long loading took
COMMAND_SLACK = 0.1  # of --time-limit: what a command may end past it, its reading aside
# (the promise: the limit + 10 % + reading the file); a command whose work no limit cuts
# needs more after the reading says so first
OUTPUT_CPU_PER_BUFFER = 5e-6  # a buffer's writing, per output file (JSON: about 4 us; CSV,
# C header and page less): kept off the solve's limit at the command's pace
CEILING_CPU_PER_BUFFER = 3.5e-6  # a buffer's share of the work every solve does whatever
# the limit: the bound, parts, units, the time sweep's pass and the validation of its plan
# (measured at load 16: 3.2 CPU-s at 1M network-like buffers, 3.4 at 1M training)
EXPLAIN_CPU_PER_BUFFER = 4.5e-6  # explain: a buffer's share of what it does whatever the
# limit (the peak and its tensors, the bound, the producers and readers; beside the plan's
# pass and check): the most measured at 10^6 buffers, load 8-10, the whole command's CPU
# less its reading and the plan's: decoder 4.2 us (steps and aliases), training step 2.1
# (350k tensors at the peak), network-like 0.9
CHANGE_CPU_PER_BUFFER = 1.2e-6  # explain: a buffer's share of one remedy measured (the
# problem rebuilt with one tensor changed, its bound: 1.2 CPU-s at 1M training buffers,
# load 9): a remedy starts only if this much is left, the first one too
EXPLAIN_PLAN_SHARE = 1 / 3  # explain: of the time left after loading, the CPU seconds of the
# plan whose gap is explained (its wall limit: the time left less COMMAND_LEAST_SHARE)

# --- library entry points (memplan.api, memplan.diagnosis)
HEURISTIC_MOST = 0.9  # of the time limit, on the wall clock: the most the heuristics' own
# limit may be by default, so that the exact planner and the validation still fit the limit
HEURISTIC_SHARE, HEURISTIC_LEAST = 0.5, 1.0  # of the time limit, and at least these seconds
# (also without a limit): each heuristic's own limit by default, half for the exact planner
SEARCH_LEAST, SEARCH_SHARE = 9.0, 1 / 6  # before the exact planner on large problems: a timed
# search of `best` of this many CPU seconds (at most HEURISTIC_MOST of the limit), or this
# share of a longer limit (its work, SEARCH_WORK units, bounds it on small ones)
SEARCH_SWEEPS_SHARE = 0.5  # that share where the ceiling's work does not fit the limit (only
# the sweeps, `long_first` and the stack run) and `long_first` takes the problem: its small
# problem's descent needs about 6 CPU-s at 10^6 network-like buffers, where the exact
# planner's windows moved none of the long-lived buffers that set the peak (124, none improved)
EXACT_LEAST = 0.02  # of the time limit: less left after the heuristics, no exact planner
VALIDATE_MARGIN = 1.5  # times a timed validation, kept to validate the next plan (`best`'s
# later passes, the exact planner's plan after the heuristics')
COMPARE_SLACK = 0.05  # of compare's time limit: what a last planner may take past it
CAPACITY_SHARE = 0.8  # explain: of the time limit, the most the capacity reason takes
WINDOW_CHECK_SHARE, WINDOW_CHECK_LEAST = 0.1, 1.0  # capacity reason: of its limit (and at
# least these seconds), one check of a time window around a loaded step: a few windows
# are tried before the whole problem gets what is left
QUICK_CHECK = 0.5  # a CP-SAT check this short runs in the caller's thread (no other thread)

# --- the ceiling (memplan.registry): the cheapest greedy, uncut, unless its work would not fit
CEILING_PAIRS_PER_SECOND = 12_000_000  # pairs its compiled pass visits a CPU second (69 M
# pairs, a 60k-buffer training step: 4-5 s quiet, 8.4 CPU-s beside busy processes; 556 M
# pairs, eight of them end to end, 67 CPU-s)
CEILING_SHARE = 0.5  # of the time limit, the most its work may take at that rate
CEILING_LEAST_WORK = 1_000_000  # pairs it may visit whatever the limit (0.1 s)

# --- heuristics (memplan.heuristics)
PAIR_SECONDS = 250e-9  # listing one pair, rounded up (measured 200-230 ns, BENCHMARKS.md)
PAIR_SHARE = 1 / 3  # of a time limit: the most listing pairs may take (the passes: the rest)
VALIDATE_SHARE = 0.2  # best: of the limit, on the wall clock, kept for validating until one
# validation is timed: the winner's validation must end within the caller's limit and load
# slows it as much as the passes, so this reserve enforces the limit (no hand-over)
SLICE_SECONDS = 0.05  # anneal: wall seconds of search between two looks for Ctrl-C
ROOMS_SHARE = 0.2  # long_first: of the small problem's CPU time, for the rooms planned again
LONG_FIRST_SWEEPS = 8  # best: `long_first` starts only with this many first sweeps' CPU
# time left (its small problem and rooms cost a few sweeps; less, and `peak_stack` gets it)

# --- the exact planner (memplan.solver)
WARM_START_SHARE = 0.1  # of the time limit given to the warm-start heuristic, and at least
WARM_START_SECONDS = 1.0  # this (up to half the limit): its first pass at 100k buffers needs it
# (CPU seconds for `best`, its ``cpu`` budget, within the wall time left of the limit; another
# warm-start planner's own time limit; the CPU seconds it took are what the parts count)
CP_IMPORT_SECONDS = 0.4  # wall: importing CP-SAT takes longer even on a quiet machine
DESCENT_SHARE = 0.75  # minimise: of a part's CPU seconds (per thread), bisecting by fit races
DESCENT_STEP_SECONDS = 16.0  # minimise: most CPU seconds (per thread) one fit race takes
# (deterministic mode: CP-SAT's deterministic seconds)
DETERMINISTIC_SLICE = 0.5  # deterministic seconds of the first round-robin slice
WINDOW_CPU = 2.0  # LNS: most CPU seconds (per CP-SAT thread) one neighbourhood gets
PROBE_SECONDS = 1.0  # canonical, minimise: the first probes' time; doubled when all are given up
PROBE_CPU_SHARE = 0.5  # minimise: of a part's CPU seconds, the most its canonical fit probe
# takes (less than PROBE_SECONDS: no probe, too short to finish one pass over a large part)
CLOCK_CUT_SHARE = 0.99  # of a deterministic CP-SAT run's wall cap: a run that took this
# much of it ended at the clock, not at its deterministic budget
PACE_AFTER_SECONDS = 1.0  # canonical racing CP-SAT: CPU seconds (a thread's) before its pace
# counts, and the slowest pace (nodes a CPU second) it keeps going at: tilings 2-5 k,
HEAD_START_PACE = 8_000  # MiniMalloc's 25 k and more
NODES_PER_SECOND = 50_000  # deterministic mode: canonical nodes counted as one second
HEAD_START_SECONDS = (1.0, 3.0)  # fit: least and most CPU seconds the canonical search
# has alone (each of its threads)
CANONICAL_UNTIMED_SECONDS = 10.0  # canonical planner, no time limit: its descent's length
CANONICAL_START_SHARE = 0.25  # of the limit, at most, for its start plan without a hint
# (``best``'s CPU budget, within the wall time left)
SHARED_OBJECTS_UNTIMED_SECONDS = 60.0  # shared_objects_exact: its limit when none is given

# --- deployments (memplan.deploy) and the operator order
STAGE_SHARE = 0.5  # of the time limit, per CP-SAT thread: stage 1 (regions, or the peak)
MIN_STAGE_SECONDS = 0.1  # wall: the shortest time limit one of their CP-SAT runs gets
RELAX_SHARE = 0.25  # regions: of a stage's CPU, at most, for its relaxation
NARROW_CPU = 0.05  # regions: CPU seconds the narrow layout sweep may take whatever the
# stage's CPU left, in state entries at the rate below: its beam of 64 took 0.3-3.3 M
# entries on the decoders' banks (1 << 20 to 1 << 22 proved the same ones), 0.01-0.07 s
# compiled
LAYOUT_WORK_PER_CPU = 12_000_000  # regions: state entries the layout sweep in numpy touches
# a CPU second (Phi-3's 50 % bank: 16.8 M in 1.0 s at load 12); its work within a stage's
# CPU left
LAYOUT_KERNEL_WORK_PER_CPU = 45_000_000  # the same, compiled (``_layout_kernel.c``):
# Phi-3's and Mistral's 50 % banks, a beam of 2,048: 16.8 M in 0.34 s at load 8
RELAX_LEAST = 0.05  # regions: CPU seconds per worker a relaxation may take of a shorter
# stage's share (it gives the proof; usually solved in 5-30 ms on ExecuTorch's graphs), and
# the least the ceiling's run of stage 1 gets, whatever the first run took
FULL_MODEL_LEAST = 0.05  # regions: CPU seconds per worker a stage must have left for its
# full model (built in 20-50 ms on ExecuTorch's graphs) once it has a plan; less: it ends
AIM_CPU = 0.05  # regions: CPU seconds per worker of the arena stage's aimed search
# (`memplan.deploy.regions_exact._aimed`) when it has less than FULL_MODEL_LEAST left and no
# plan within the gap: on the decoders' banks it found the plan at the bound in 0.01-0.05
FAST_SHARE = 0.2  # exact order: of the time limit, for the fast order (the warm start)
STARTS_SHARE = 0.25  # fast order: of its CPU seconds, the most the random list schedules take
WINDOW_SHARE = 1 / 8  # exact order on large graphs: of the windows' CPU seconds, one window's
WINDOW_LEAST_CPU = 1.0  # exact order: CPU seconds one window gets, at least
ORDER_MODEL_SHARE = 0.5  # exact order on large graphs: of its allowance, the whole model's run
# (the rest goes to windows around the peak)

# --- compiler passes (memplan.executorch)
SEARCH_CPU_PER_NODE = 4e-4  # ExecuTorch's regions: CPU seconds (all threads) of the search a
# graph node, by default: about a quarter of what lowering costs a node (`to_executorch`
# with BankedGreedy, 1.35-1.6 ms a node: Phi-3 503 nodes 0.69 s, deit-tiny 1,172 nodes 1.8 s)

# --- sweeps
PARQUET_EVERY = 5.0  # wall seconds between rewrites of a sweep's Parquet output
SWEEP_WATCH_SECONDS = 0.5  # wall: how often a sweep looks for finished tasks (and Ctrl-C)
