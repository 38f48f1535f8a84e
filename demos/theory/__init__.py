"""Theory: the analytic model (`calc`) and the launch guard (`guard`) that asks it whether a run fits.

Everything here is computed from counts and byte sizes; nothing is measured, and nothing imports
torch, so the CLI and the quiz can use it at once. It may import the top-level `units` and the
torch-free model shapes in `train.presets`.
"""
