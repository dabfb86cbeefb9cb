"""On a GPU, the fast paths equal the readable ones: the fused bf16 attention kernels, a
torch.compile'd training step, and the trainer compiled, with CUDA graphs too; and a batch goes
up without waiting for the GPU. Skipped without CUDA (CI has none); run them where one is lent
(`tfm_lab/results/measure_gpu.py tests`)."""
import copy
import time

import pytest
import torch

import tfm_ref
from tfm_lab.tasks import DateTask
from tfm_lab.train import TrainConfig, train

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


def _qkv(device, dtype, batch=2, heads=4, length=64, width=32):
    gen = torch.Generator(device=device).manual_seed(0)
    return [torch.randn(batch, heads, length, width, generator=gen, device=device).to(dtype) for _ in range(3)]


@pytest.mark.parametrize("masking", ["none", "causal", "padding with an empty row"])
def test_bf16_fused_attention_equals_the_readable_path(masking):
    q, k, v = _qkv("cuda", torch.bfloat16)
    mask = None
    if masking == "padding with an empty row":
        mask = tfm_ref.key_mask(tfm_ref.padding_mask(torch.tensor([64, 0], device="cuda"), 64))  # (B, 1, 1, S)
    causal = masking == "causal"
    fast = tfm_ref.sdpa_attention(q, k, v, mask, is_causal=causal)
    readable = tfm_ref.scaled_dot_product_attention(q.float(), k.float(), v.float(), mask, is_causal=causal)
    assert fast.dtype == torch.bfloat16 and torch.isfinite(fast).all()
    torch.testing.assert_close(fast.float(), readable, rtol=2e-2, atol=2e-2)  # bf16 keeps 8 bits of mantissa


def _step(model, batch, optimizer):
    src, tgt_in, tgt_out = batch
    logits = model(src, tgt_in)  # (B, T, V)
    loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), tgt_out.flatten())
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    return loss.detach()


@pytest.fixture
def full_float32():
    """Matrix products in full float32 whatever ran before in this process (the trainer turns TF32 on)."""
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32 = before


def test_one_compiled_training_step_equals_the_eager_one(full_float32):
    # in TF32 a gradient near zero could change sign between the two, and with it AdamW's first step (±lr)
    torch.manual_seed(0)
    config = tfm_ref.TransformerConfig(vocab_size=50, d_model=64, n_heads=4, n_encoder_layers=2, n_decoder_layers=2,
                                       d_ff=128, dropout=0.0, max_len=32)
    eager = tfm_ref.Transformer(config).cuda()
    compiled_model = copy.deepcopy(eager)
    compiled = torch.compile(compiled_model)
    gen = torch.Generator(device="cuda").manual_seed(1)
    batch = [torch.randint(3, 50, (8, 16), generator=gen, device="cuda") for _ in range(3)]
    losses = [_step(model, batch, torch.optim.AdamW(params.parameters(), lr=1e-3))
              for model, params in ((eager, eager), (compiled, compiled_model))]
    torch.testing.assert_close(losses[1], losses[0], rtol=1e-4, atol=1e-4)
    for (name, a), (_, b) in zip(eager.state_dict().items(), compiled_model.state_dict().items()):
        torch.testing.assert_close(b, a, rtol=1e-3, atol=1e-4, msg=f"{name} after one step")


@pytest.mark.parametrize("mode", ["default", "reduce-overhead"])
def test_the_trainer_compiled_trains_as_the_eager_one(mode):
    # reduce-overhead replays CUDA graphs, whose outputs the next replay overwrites: the loop must
    # have read each step's loss before then
    settings = dict(task="dates", steps=20, batch_size=256, eval_every=10, eval_size=500, log_every=1, device="cuda",
                    precision="fp32", progress=False)
    eager, compiled = train(TrainConfig(**settings)), train(TrainConfig(**settings, compile=True, compile_mode=mode))
    # the matrix products run in TF32 on both sides, in kernels of their own: close, not equal
    assert [log["loss"] for log in compiled["losses"]] == pytest.approx([log["loss"] for log in eager["losses"]],
                                                                       rel=1e-2)
    assert compiled["summary"]["compile_mode"] == mode and compiled["summary"]["compile_seconds"] > 0


def test_a_batch_goes_up_while_the_gpu_is_still_busy():
    batch = DateTask().batch_for_step(0, 2048, seed=0)
    batch.to("cuda", non_blocking=True)  # the first copy sets up the pinned memory pool
    torch.cuda.synchronize()
    torch.cuda._sleep(2_000_000_000)  # keeps the GPU busy for about a second (cycles at ~2 GHz)
    start = time.perf_counter()
    moved = batch.to("cuda", non_blocking=True)
    queued_in = time.perf_counter() - start
    torch.cuda.synchronize()
    # from pageable memory the copy would have waited for the sleep to end
    assert queued_in < 0.2, f"Batch.to waited {queued_in:.2f} s for the GPU's queued work"
    for name in ("inp", "target", "src", "src_mask"):
        assert torch.equal(getattr(moved, name).cpu(), getattr(batch, name)), name
