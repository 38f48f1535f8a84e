"""Training: the `ddp`, `zro`, `fsdp` and `compare` demos, from model shape to the checked result.

Owns the models built from the shapes of `demos.shapes`, synthetic data, the
strategies that wrap a model (DDP, zro, FSDP2, FSDP1), a run's configuration with every option
and its default, torch-free (`spec`), the demos' command line made from it and its checks
(`options`), the loop
that trains and measures (`loop`), the demo that assembles the result (`demo`) and the claims a run
is checked against (`claims`); and the simulated run of the same demos on fake tensors over a fake
process group (`simulate`) with the claims it is checked against (`simulated_claims`). It may import measure/, theory/ and the bottom stage's modules (`shapes`, `units`, ...).
"""
