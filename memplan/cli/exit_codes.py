"""The exit codes of every ``memplan`` command, in one place.

The reference (``docs/reference/errors.md``) lists what each command means
by 0 and 1; the values themselves never change between releases, since
scripts and CI jobs branch on them.
"""

OK = 0  # success: a plan (within the capacity), a valid plan, every task ran, a proof
FAILED = 1  # an answer that is no: infeasible, undecided in the time limit, invalid, not proven
BAD_INPUT = 2  # bad usage or bad input: one line names the file and what is wrong
INTERNAL = 3  # a defect memplan caught in itself (`memplan.errors.UnsoundBoundError`)
INTERRUPTED = 130  # Ctrl-C before any result (128 + SIGINT, as shells report it)
