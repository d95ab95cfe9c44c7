"""Hand-worked cases for profile standard's attention: what FlashAttention's kernels execute,
and the keys a query scores in a sliding window or a chunk (arithmetic in the comments)."""

from __future__ import annotations

import pytest

from models.layout import Layout
from models.transformer import TransformerSpec
from optimizer.costmodel.profiles import evaluate
from optimizer.costmodel.standard import times as tim
from tests.helpers import plate_job
from tests.test_standard_formulas import TOY


def test_fused_attention_pays_flash_attentions_backward_recompute() -> None:
    # q width 4, s 8, 16 tokens on tp 2 at 100 FLOP/s and efficiency 0.5, causal half:
    # model FLOPs 12 * 4 * 8 * 0.5 = 192 a token, 192 * 16 / (2 * 100 * 0.5) = 30.72 s;
    # FlashAttention's kernels execute 3.5 forwards (4 * 4 * 8 * 0.5 = 64 each) = 224 a token
    assert tim.attention_s(4, 8, 16, 2, 100, 0.5, 0.5) == pytest.approx(30.72)
    ratio = tim.FUSED_ATTENTION_KERNEL_FLOPS_RATIO
    assert tim.attention_s(4, 8, 16, 2, 100, 0.5, 0.5, ratio) == pytest.approx(
        3.5 * 64 * 16 / (2 * 100 * 0.5)
    )
    # a fused layer of the plate pays the ratio; unfused attention stores its scores and
    # recomputes nothing, so its batched matmuls are model FLOPs at matmul efficiency
    job, layout = plate_job(64, "llama3-8b"), Layout(tp=1, pp=1, cp=1, vpp=1, micro_batch=1)
    m, s, gpu = job.model, job.training.seq_len, job.cluster.gpu
    fused = evaluate(job, layout, "standard").times_s["attention"]
    by_hand = 3.5 * 4 * m.q_width * s * 0.5 * s / (gpu.peak_flop_s * gpu.attention_efficiency)
    # at 8,192 tokens cuDNN's H200 runs a causal sequence at (8192 x 8193 / 2 scores over
    # 1.708 + 5.083 ms) / (16384 x 16385 / 2 over 6.531 + 19.002 ms) = 0.940 of the
    # 16,384-token rate where the efficiency holds (attention_table.py)
    rate = (8192 * 8193 / 2 / (1.708 + 5.083)) / (16384 * 16385 / 2 / (6.531 + 19.002))
    assert s == 8192 and rate == pytest.approx(0.940, abs=5e-4)
    assert fused == pytest.approx(by_hand / rate)
    # full recompute replays one forward: a third of the matmuls, one of attention's 3.5
    full = evaluate(job, layout.model_copy(update={"recompute": "full"}), "standard").times_s
    assert full["recompute"] == pytest.approx(full["matmul"] / 3 + full["attention"] / 3.5)


def test_a_sliding_window_scores_its_band() -> None:
    # 4 layers, 2 of them windowed, w = 2 of s = 8. Keys a query scores, full-square
    # convention: (2 x 8 + 2 x 2) / 4 = 5; no window, or one as long as the sequence: 8
    assert tim.attended_keys(8, 2, 2, 4) == 5
    assert tim.attended_keys(8, None, 0, 4) == 8 and tim.attended_keys(8, 16, 4, 4) == 8
    # the causal band: sum_i min(i, 2) = 1 + 2 x 7 = 15 scores of the triangle's 36, so a
    # windowed layer computes 0.5 x 15 / 36 of the square at causal_fraction 0.5
    share = tim.attention_work_share(8, 2, 2, 4, 0.5)
    assert share == pytest.approx((2 * 0.5 + 2 * 0.5 * 15 / 36) / 4)
    assert tim.attention_work_share(8, 8, 4, 4, 0.5) == pytest.approx(0.5)


def test_a_chunked_layer_scores_its_chunks() -> None:
    # 4 layers, 2 chunked in chunks of 3 tokens, s = 8: chunks 3, 3, 2. Full-square keys a
    # query: the block-diagonal's 9 + 9 + 4 = 22 cells over 8 queries = 2.75, so the layers
    # average (2 x 8 + 2 x 2.75) / 4 = 5.375; a chunk as long as the sequence is full attention
    assert tim.chunked_squares(8, 3) == 22
    assert tim.attended_keys(8, None, 0, 4, 3, 2) == pytest.approx(5.375)
    assert tim.attended_keys(8, None, 0, 4, 8, 4) == 8
    # causal triangles 6 + 6 + 3 = 15 of the sequence's 36 scores, at causal_fraction 0.5
    share = tim.attention_work_share(8, None, 0, 4, 0.5, 3, 2)
    assert share == pytest.approx((2 * 0.5 + 2 * 0.5 * 15 / 36) / 4)
    # a window of 2 on one layer and chunks of 3 on another, one full: the three averaged
    both = tim.attention_work_share(8, 2, 1, 3, 0.5, 3, 1)
    assert both == pytest.approx((0.5 + 0.5 * 15 / 36 + 0.5 * 15 / 36) / 3)


def test_chunks_and_windows_must_fit_the_layers() -> None:
    toy = TOY.model_dump()
    with pytest.raises(ValueError, match="chunked_attention_layers needs attention_chunk_size"):
        TransformerSpec.model_validate({**toy, "chunked_attention_layers": 2})
    with pytest.raises(ValueError, match=r"windowed \(3\) and chunked \(2\)"):
        TransformerSpec.model_validate(
            {
                **toy,
                "sliding_window": 2,
                "sliding_window_layers": 3,
                "attention_chunk_size": 4,
                "chunked_attention_layers": 2,
            }  # fmt: skip
        )
    assert TransformerSpec.model_validate({**toy, "attention_chunk_size": 4}).chunked_layers == 4


def test_a_windowed_model_pays_for_its_band_and_counts_it_as_model_work() -> None:
    # Llama 3 8B with every layer windowed to 1,024 of 8,192 tokens: fused attention takes
    # the band's (1024 x 8192 - 1024 x 1023 / 2) / (8192 x 8193 / 2) = 0.2344 of the causal
    # layer's work, and model FLOPs count 1,024 keys a query instead of 8,192
    full = plate_job(64, "llama3-8b")
    spec = full.model.model_copy(update={"sliding_window": 1024})
    windowed = full.model_copy(update={"model": TransformerSpec.model_validate(spec.model_dump())})
    layout = Layout(tp=1, pp=1, cp=1, vpp=1, micro_batch=1, zero=1)
    before, after = evaluate(full, layout, "standard"), evaluate(windowed, layout, "standard")
    band = (1024 * 8192 - 1024 * 1023 / 2) / (8192 * 8193 / 2)
    # and runs at 1,024 keys' rate, not 8,192's: cuDNN's H200 window run (head dim 64, 2 x 64
    # heads, 33,030,656 band scores in 3.021 + 9.045 ms) against its 8,192-token causal one
    # (head dim 128, 64 heads, 8192 x 8193 / 2 scores in 1.708 + 5.083 ms)
    r_window = (1024 * 32768 - 1024 * 1023 / 2) * 64 * 64 * 2 / (3.021 + 9.045)
    r_8192 = 8192 * 8193 / 2 * 128 * 64 / (1.708 + 5.083)
    expected = before.times_s["attention"] * band * r_8192 / r_window
    assert after.times_s["attention"] == pytest.approx(expected)
    m = full.model
    per_token = 6 * (m.active_layer_params + m.vocab_size * m.hidden_size)
    attention = m.num_layers * 12 * m.q_width
    flops_ratio = (per_token + attention * 1024) / (per_token + attention * 8192)
    tokens_ratio = after.tokens_per_s_per_gpu / before.tokens_per_s_per_gpu
    assert after.mfu / before.mfu == pytest.approx(flops_ratio * tokens_ratio)
