"""Measuring: what a rank holds and does, read from the tensors, clocks and collectives themselves.

Owns model-state bytes, the tracked memory peak and step timing (`memory`), the collective counter
(`comm`), and the reports that print a training result for a person (`report`, and
`simulated_report` for a simulated one). It may import the
top-level `units` and `checks`; it never imports train/ or theory/, so every stage can measure.
"""
