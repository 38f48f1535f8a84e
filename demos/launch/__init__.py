"""Launching: start a demo on N ranks with torch.distributed.run, stream their JSON-lines events, stop them.

Owns the launcher (child process group, cancellation), the per-rank context a demo receives, the
event protocol between ranks and launcher, and what this machine has (GPUs, backends, cores). It may
import the top-level `registry`, `worker` and `units`; it never imports train/, measure/ or theory/,
and its modules import torch only inside the functions that need it.
"""
