"""The operator-order search: the schedule of an ONNX graph that lowers the peak.

`operator_order` (layer 3): a fast list schedule and local search, or CP-SAT
over operator positions and offsets at once (``memplan.reorder``). It plans
on top of the planners and reads models with `memplan.onnx`.
"""
