"""TensorFlow Lite and TFLite-Micro: the reader, the writers and the proof in TFLM's interpreter.

- reads (layer 2): `tflite` (``from_tflite``: the problem TFLM plans);
- writes (layer 3): `tflm` (TFLM's ``OfflineMemoryAllocation`` metadata bytes)
  and `tflite_model` (the ``.tflite`` model with the plan inside);
- proves (top layer): `tflm_arena` (the model run in TFLM with its planner and
  with memplan's plan; ``python -m memplan.cli.tflm_proof`` from a shell).

Needs the ``tflite`` extra.
"""
