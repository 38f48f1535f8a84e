"""The quiz functions of the at-scale concerns, gathered for `quiz_answers.QUIZ_FUNCTIONS`: stragglers,
checkpoints, topology and scaling, 8-bit optimizer state and LoRA adapters, each a number. The 3-D plan's
answer is a choice of degrees, not a number: the interview names it (`plan3d.QUIZ_FUNCTIONS`)."""

from __future__ import annotations

from ddpfsdp.demos.theory import checkpointing, lora, optimizer_8bit, stragglers, topology

QUIZ_FUNCTIONS = {
    **stragglers.QUIZ_FUNCTIONS,
    **checkpointing.QUIZ_FUNCTIONS,
    **topology.QUIZ_FUNCTIONS,
    **optimizer_8bit.QUIZ_FUNCTIONS,
    **lora.QUIZ_FUNCTIONS,
}
