"""Build step for memplan's two compiled kernels (everything else is in pyproject.toml).

The canonical search of the exact planner (`memplan.solver.canonical`) and the
heuristics' order x placement pass and time sweep
(`memplan.heuristics.compiled_place`) run in C. Both extensions are optional:
without a C compiler the package still installs, the exact planner uses CP-SAT
alone and the heuristics place in numpy and sweep in Python.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("memplan.solver._canonical_kernel",
                             ["memplan/solver/_canonical_kernel.c"],
                             extra_compile_args=["-O3"], optional=True),
                   Extension("memplan.heuristics._placement_kernel",
                             ["memplan/heuristics/_placement_kernel.c"],
                             extra_compile_args=["-O3"], optional=True)])
