"""memplan's benchmarks: one runner, suites of real and generated problems.

Run ``python -m benchmarks run --suite minimalloc --planner all``; see
BENCHMARKS.md for the commands behind every published figure. The runner
(`benchmarks.runner`) runs each (problem, planner) in a fresh subprocess
(`benchmarks.worker`), so that peak memory is that run's own and a hung run
can be killed; the suites (`benchmarks.suites`) build their problems lazily
inside that subprocess; `benchmarks.generate` holds the seeded generators.
"""
