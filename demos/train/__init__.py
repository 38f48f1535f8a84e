"""Training: the `ddp`, `fsdp` and `compare` demos, from model shape to the checked result.

Owns the model shapes (`presets`, torch-free) and the models built from them, synthetic data, the
strategies that wrap a model (DDP, ZeRO-1, FSDP2, FSDP1), a run's configuration (`spec`), the loop
that trains and measures (`loop`), the demo that assembles the result (`demo`) and the claims a run
is checked against (`claims`). It may import measure/ and theory/ and the top-level shared modules.
"""
