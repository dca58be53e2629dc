"""Build step for memplan's compiled kernels (everything else is in pyproject.toml).

The canonical search of the exact planner (`memplan.solver.canonical`), the
heuristics' order x placement pass and time sweep
(`memplan.heuristics.compiled_place`) and their order search
(`memplan.heuristics.anneal`) and the ONNX reader's field walk
(`memplan.onnx.onnx_weightless`), the validator's sweep (`memplan.validate`) and the
alias groups' union-find (`memplan.problem.alias_components`) run in C. The extensions are optional:
without a C compiler the package still installs, the exact planner uses CP-SAT
alone, the heuristics place in numpy and sweep in Python, the ONNX reader
walks fields, the validator sweeps and the union-find joins in Python.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("memplan.solver._canonical_kernel",
                             ["memplan/solver/_canonical_kernel.c"],
                             extra_compile_args=["-O3"], optional=True),
                   Extension("memplan._validate_kernel", ["memplan/_validate_kernel.c"],
                             extra_compile_args=["-O3"], optional=True),
                   Extension("memplan._union_find", ["memplan/_union_find.c"],
                             extra_compile_args=["-O3"], optional=True),
                   Extension("memplan.heuristics._placement_kernel",
                             ["memplan/heuristics/_placement_kernel.c"],
                             depends=["memplan/heuristics/_interval_place.h",
                                      "memplan/heuristics/_free_gaps.h"],
                             extra_compile_args=["-O3"], optional=True),
                   Extension("memplan.heuristics._search_kernel",
                             ["memplan/heuristics/_search_kernel.c"],
                             depends=["memplan/heuristics/_interval_place.h"],
                             extra_compile_args=["-O3"], optional=True),
                   Extension("memplan.deploy._layout_kernel",
                             ["memplan/deploy/_layout_kernel.c"],
                             extra_compile_args=["-O3"], optional=True),
                   Extension("memplan.onnx._onnx_strip",
                             ["memplan/onnx/_onnx_strip.c"],
                             extra_compile_args=["-O3"], optional=True)])
