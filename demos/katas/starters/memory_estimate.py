"""Per-GPU memory of a strategy: the model state one GPU holds between steps.

Return {"params_bytes": ..., "grads_bytes": ..., "optimizer_bytes": ...}: the bytes of parameters,
gradients and optimizer state one of `gpus` GPUs holds for a model of `params` parameters, exactly as
`ddpfsdp calc --params P --gpus G --precision X --optimizer O` reports them for the strategy:

    strategy    ddp, zero1, zero2 or zero3
    precision   fp32, bf16-mixed (PyTorch's: fp32 held, bf16 only for compute) or bf16-master (the ZeRO paper's:
                bf16 held, an fp32 master copy in the optimizer)
    optimizer   adamw (two state tensors), sgd-momentum (one) or sgd (none)

Each strategy is one implementation in calc: DDP is PyTorch's; ZeRO-1 and ZeRO-2 are DeepSpeed's, whose
optimizer keeps its own fp32 copy of the partition it steps; ZeRO-3 is FSDP2's under fp32 and bf16-mixed.
Whatever is sharded is split into ceil(params / gpus) parameters per GPU.

Importing ddpfsdp is refused: the analytic model is the answer. The checker compares your numbers with
calc's over generated cases.

    ddpfsdp kata check memory-estimate          ddpfsdp kata hint memory-estimate
"""


def model_state_bytes(params, gpus, strategy, precision, optimizer):
    raise NotImplementedError("the bytes of parameters, gradients and optimizer state per GPU")
