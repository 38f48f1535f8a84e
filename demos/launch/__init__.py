"""Launching: start a demo on N ranks (through the agent, demos/agent.py), stream their JSON-lines events, stop them.

Owns what a demo is asked, read once and handed to the ranks (`request`), the launch guard that asks
the analytic model whether a run fits (`guard`), the launcher (child process group, cancellation),
the per-rank context a demo receives, the event protocol between ranks and launcher, and what this
machine has (GPUs, backends). It sits above train/, measure/, concepts/ and theory/, whose modules it
may import, and the top-level `registry`; never the `worker` or the `agent` (the ranks' side, started as
processes), nor the quiz. Its modules import torch only inside the functions that need it.
"""
