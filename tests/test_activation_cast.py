"""Activations under bf16-mixed depend on how the precision is applied: torch.autocast (DDP) keeps the
residual stream in fp32, FSDP2's MixedPrecisionPolicy(param_dtype=bf16) makes it bf16. Examples worked by
hand, and what a real block saves for backward under each."""

from __future__ import annotations

import textwrap

import pytest
from conftest import run_script_on_ranks

from ddpfsdp.demos.theory.activations import transformer_activation_bytes
from ddpfsdp.demos.theory.implementations import implementation
from ddpfsdp.demos.theory.precision import precision_for, residual_bytes


def _block(cast: str, **kwargs) -> dict[str, int]:
    shape = {"layers": 2, "d_model": 128, "tokens": 64, "batch_size": 2, "head_outputs": 256, "head_tokens": 64,
             "precision": "bf16-mixed", "checkpoint_activations": False}
    return transformer_activation_bytes(**{**shape, **kwargs}, cast=cast)


def test_the_residual_stream_is_fp32_under_autocast_and_bf16_under_fsdp2_s_param_dtype():
    spec = precision_for("bf16-mixed")
    assert residual_bytes(spec, "autocast") == 4 and residual_bytes(spec, "param-dtype") == 2
    # Recipes that hold the model in one dtype do not depend on the cast.
    for name in ("fp32", "bf16", "bf16-master"):
        assert residual_bytes(precision_for(name), "autocast") == residual_bytes(precision_for(name), "param-dtype")
    with pytest.raises(ValueError, match="cast"):
        residual_bytes(spec, "amp")


def test_each_strategy_names_how_it_applies_the_precision():
    assert implementation("ddp", "bf16-mixed").cast == "autocast"
    assert implementation("zero1", "bf16-mixed").cast == "autocast"  # DeepSpeed's torch_autocast
    for fsdp in ("grad-op", "zero3", "hsdp"):
        assert implementation(fsdp, "bf16-mixed").cast == "param-dtype"


def test_block_and_head_bytes_by_hand():
    # b*s*d = 2*64*128 = 16,384 elements.
    # autocast: block (2*4 + 14*2) = 36 B each = 589,824; head 16,384*(4 + 2) + log-softmax 2*64*256*4 = 131,072
    #   -> 98,304 + 131,072 = 229,376; saved 2*589,824 + 229,376 = 1,409,024; peak adds 131,072 = 1,540,096.
    autocast = _block("autocast")
    assert autocast["block_bytes"] == 589_824 and autocast["head_bytes"] == 229_376
    assert autocast["activation_bytes"] == 1_540_096
    # FSDP2 param_dtype=bf16: block (2*2 + 14*2) = 32 B each = 524,288; head 16,384*(2 + 2) + 131,072 = 196,608
    #   (the loss's log-softmax stays fp32: the logits are cast to fp32 for the loss);
    #   saved 2*524,288 + 196,608 = 1,245,184; peak 1,376,256. The block is 4/36 = 11% smaller.
    fsdp = _block("param-dtype")
    assert fsdp["block_bytes"] == 524_288 and fsdp["head_bytes"] == 196_608
    assert fsdp["activation_bytes"] == 1_376_256
    # tp=8 with sequence parallelism: the residual terms are 1/8, the 12c middle 1/8, the 2c LayerNorm outputs whole.
    # autocast: 16,384*(2*4/8 + 2*2 + 12*2/8) = 16,384*8 = 131,072; param-dtype: 16,384*(2*2/8 + 4 + 3) = 16,384*7.5.
    assert _block("autocast", tp=8, sequence_parallel=True)["block_bytes"] == 131_072
    assert _block("param-dtype", tp=8, sequence_parallel=True)["block_bytes"] == 122_880


_SAVED = textwrap.dedent(
    """
    import torch, torch.distributed as dist
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from ddpfsdp.demos.measure.saved import SavedActivations
    from ddpfsdp.demos.train.data import compute_loss
    from ddpfsdp.demos.train.models import GPT
    from ddpfsdp.demos.base.shapes import GPTShape
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    shape = GPTShape(layers=2, d_model=128, heads=4, seq_len=64, vocab=256)
    torch.manual_seed(0)
    batch = (torch.randint(0, 256, (2, 64)), torch.randint(0, 256, (2, 64)))
    out = {}
    for mode in ("autocast", "fsdp2"):
        model = GPT(shape)
        if mode == "fsdp2":
            policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
            for block in model.blocks:
                fully_shard(block, mp_policy=policy)
            fully_shard(model, mp_policy=policy)
        saved = SavedActivations(model.blocks[0])
        with saved, torch.autocast("cpu", dtype=torch.bfloat16, enabled=mode == "autocast"):
            loss = compute_loss("gpt", model, batch)
        loss.backward()
        block = model.blocks[0]
        # Under autocast a block also saves the bf16 copies of its Linear weights (counted in the working set).
        copies = sum(m.weight.numel() * 2 for m in block.modules() if isinstance(m, torch.nn.Linear))
        out[mode] = {"saved": saved.bytes, "weight_copies": copies if mode == "autocast" else 0}
    """
)


@pytest.mark.dist
def test_a_real_block_saves_what_the_model_counts_under_each_cast(tmp_path):
    # One gloo rank runs fully_shard as it would on many: the saved tensors do not depend on the world size.
    measured = run_script_on_ranks(_SAVED, tmp_path, nprocs=1)[0]
    fsdp = measured["fsdp2"]["saved"]
    autocast = measured["autocast"]["saved"] - measured["autocast"]["weight_copies"]
    # Beyond the model's 2r + 14c: LayerNorm's mean and rstd and attention's logsumexp, under 1% here.
    assert fsdp == pytest.approx(_block("param-dtype")["block_bytes"], rel=0.02)
    assert autocast == pytest.approx(_block("autocast")["block_bytes"], rel=0.02)
    # The difference is the residual stream's dtype: 2 of the 36 bytes per element, twice.
    assert fsdp < autocast * 0.92


def test_calc_s_2d_column_counts_fsdp2_s_bf16_residual_stream():
    from ddpfsdp.demos.theory.estimate import estimate

    # 70B on 64 GPUs, tp = 8, bf16-mixed, micro-batch 1; activations from the 70B size's blocks (86 layers,
    # d 8192, vocabulary 50,304, seq 4096). b*s*d = 33,554,432 elements. FSDP2 over dp applies the precision
    # by param_dtype, so r = 2: a block keeps 2r + 2c whole and 12c/8 split = 4 + 4 + 3 = 11 B per element,
    # 369,098,752 B; 86 blocks 31,742,492,672. Head: 2 + 2 B per element, 134,217,728, + the vocabulary-
    # sharded fp32 log-softmax 4096*50,304*4/8 = 103,022,592; the peak adds its gradient: 32,082,755,584 B.
    # (Autocast's r = 4 would give 15 B per element: 43,692,589,056 B, 27% more.)
    # A named size, not a preset: the column keeps the estimate beside its total, as shape_activation_bytes.
    column = estimate(params="70B", gpus=64, tp=8, precision="bf16-mixed")["strategies"]["2d"]
    assert column["shape_activation_bytes"] == 32_082_755_584
