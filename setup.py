"""Build step for memplan's one compiled kernel (everything else is in pyproject.toml).

The canonical search of the exact planner (`memplan.solver.canonical`) runs in
C. The extension is optional: without a C compiler the package still
installs, and the exact planner uses CP-SAT alone.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("memplan.solver._canonical_kernel",
                             ["memplan/solver/_canonical_kernel.c"],
                             extra_compile_args=["-O3"], optional=True)])
