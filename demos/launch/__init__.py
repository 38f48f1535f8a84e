"""Launching: start a demo on N ranks, stream their JSON-lines events, stop them.

Owns what a demo is asked, read once and handed to the ranks (`request`), the launch guard that asks
the analytic model whether a run fits (`guard`), where the ranks go (`placement`), the launcher (child
process group, cancellation) and the agent it starts (`agent`, which starts, watches and stops the
ranks on this machine), the per-rank context a demo receives (`context`), the event protocol between
ranks and launcher (`events`), and what this machine has (`hardware`). It sits above train/, measure/,
concepts/ and theory/, whose modules it may import, and the top-level `registry`. Only the agent, on the
ranks' side, imports the `worker`; the launcher never imports either (it starts them as processes), nor
the quiz. Its modules import torch only inside the functions that need it.
"""
