"""ONNX: the reader, the writer and the proof in one arena, all in this folder.

- reads (layer 2): `onnx` (``from_onnx``: a model in, a `Problem` out) on
  `onnx_graph` (the graph, its shapes and weights kept out of memory),
  `onnx_shapes`, `onnx_types`, `onnx_aliases` (in-place and view aliases),
  `onnx_options` (the model options), `onnx_batch` (a model rebatched),
  `onnx_weightless` and `onnx_vectors` (the protobuf walk, in C in
  ``_onnx_strip.c`` when built);
- writes (layer 3): `onnx_metadata` (the plan in the model's metadata_props);
- proves (top layer): `onnx_arena` (the model run node by node in one byte
  arena) and `prove` (a plan file on its model, under the model options it
  was planned with).

The operator-order search on ONNX graphs is `memplan.schedule`.
"""

BACKENDS = ("onnxruntime", "reference")  # what runs an ONNX model's nodes in the arena
