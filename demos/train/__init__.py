"""Training: the `ddp`, `zro`, `fsdp`, `compare`, `cp`, `pipeline`, `moe`, `straggler`, `checkpoint-resume` and
`local-sgd` demos, from model shape to the checked result.

Owns the models built from the shapes of `base.shapes` (`models`), synthetic data (`data`), a run's
configuration with every option and its default, torch-free (`spec`), the demos' command line made
from it and its checks (`options`), the loop that trains and measures (`loop`), the demos that
assemble the result (`demo`, `pipeline`, `context`, `moe`, with the MoE layer of `moe_layer` and the MoE
demo's command line and checks in `moe_options`), the one-process references a run's loss is held to
(`reference`), and the simulated run of the same demos on fake tensors over a fake process group
(`simulate`). A model is made parallel by parallel/, and judged by the claims in claims/. It may import
parallel/, claims/, measure/, theory/ and the ground floor.
"""
