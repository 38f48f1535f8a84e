"""Measuring: what a rank holds and does, read from the tensors, clocks and collectives themselves.

Owns model-state bytes, the tracked memory peak and step timing (`memory`), the cuBLAS workspaces a
GPU step holds (`blas_workspaces`), the collective counter (`comm`), one step recorded in time
(`timeline`), read back torch-free as lanes (`lanes`) and written as a Chrome trace (`trace`), and
the reports that print a training result for a person (`report`, and `simulated_report` for a
simulated one, sharing one table of collectives: `comm_table`; `moe_report` for an MoE run, with the
load its routers put on experts and ranks, `expert_load`; `context_report` adds the ring's). It may import the ground
floor (`base/`) and the result contract (`result/`); it never imports train/ or theory/, so every stage can measure.
"""
