"""`memplan prove`: run a model inside the planned arena, the end-to-end proof of a plan.

Top layer: may import everything below. Modules: `onnx_arena` (an ONNX model node by
node in one byte arena), `tflm_arena` (a .tflite model in TFLite-Micro's interpreter,
with its planner and with memplan's), `prove` (a plan file and its stored model options,
the validator, then the arena run).
"""

BACKENDS = ("onnxruntime", "reference")  # what runs an ONNX model's nodes in the arena
