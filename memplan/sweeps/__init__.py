"""`memplan sweep`: many plans at once (models x shapes x capacities x planners) on Dask.

Top layer: may import everything below (frontends, planners, deploy, api).
Modules: `sweep` (the engine and `memplan.sweep`), `sweep_tasks` (what one task does on
a worker), `sweep_io` (rows, CSV/Parquet, resume), `sweep_progress` (the progress bar),
`sweep_report` (the answers: tables and the HTML report); the command is `memplan.cli.sweep`.
"""
