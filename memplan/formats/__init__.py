"""The files that belong to no compiler, and the choice of reader and writer.

- memplan's own formats (layer 2): `memplan_json` (problems and plans, read
  and written) and `minimalloc_csv` (MiniMalloc's CSV);
- `c_header` (layer 2): a plan as a C header, for any model;
- `readers` (top layer): the reader of a file by its extension (``load``),
  every compiler's among them;
- `writers` (top layer): the writer of a plan by format name (``export``),
  every compiler's among them.
"""
