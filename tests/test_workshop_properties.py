"""Properties of the workshop cost model that must hold for every valid layout."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from models.hardware import ClusterSpec
from models.job import TrainingJob
from models.layout import Layout, Recompute
from models.presets import gpu_preset
from models.training import TrainingSpec
from models.transformer import TransformerSpec
from optimizer.costmodel.profiles import evaluate

PROPERTY_SETTINGS = settings(max_examples=150, deadline=None)


@dataclass(frozen=True)
class Case:
    job: TrainingJob
    layout: Layout


@st.composite
def cases(draw: st.DrawFn) -> Case:
    """A random dense model and a valid layout of it, on a cluster sized to fit the layout."""
    kv_heads = draw(st.sampled_from([1, 2, 4, 8]))
    heads = kv_heads * draw(st.sampled_from([1, 2, 4, 8]))
    head_dim = draw(st.sampled_from([64, 128]))
    model = TransformerSpec(
        num_layers=draw(st.integers(2, 128)),
        hidden_size=heads * head_dim,
        ffn_hidden_size=draw(st.integers(1, 4)) * heads * head_dim,
        num_attention_heads=heads,
        num_kv_heads=kv_heads,
        vocab_size=draw(st.integers(1000, 200_000)),
    )
    tp = draw(st.sampled_from([d for d in (1, 2, 4, 8, 16, 32) if heads % d == 0]))
    pp = draw(st.integers(1, min(model.num_layers, 32)))
    dp = draw(st.sampled_from([1, 2, 3, 4, 8, 16, 64]))
    micro_batch = draw(st.sampled_from([1, 2]))
    micro_batches = draw(st.integers(1, 64))
    max_vpp = model.num_layers // pp if pp > 1 else 1
    job = TrainingJob(
        model=model,
        cluster=ClusterSpec(gpus=tp * pp * dp, gpu=gpu_preset("h100-sxm")),
        training=TrainingSpec(global_batch=dp * micro_batch * micro_batches, seq_len=4096),
    )
    layout = Layout(
        tp=tp,
        pp=pp,
        vpp=draw(st.integers(1, min(max_vpp, 4))),
        micro_batch=micro_batch,
        zero=draw(st.integers(0, 3)),
        recompute=draw(st.sampled_from([Recompute.NONE, Recompute.FULL])),
    )
    return Case(job, layout)


def with_degrees(case: Case, **degrees: int) -> Layout:
    return case.layout.model_copy(update={**degrees, "dp": None})


@PROPERTY_SETTINGS
@given(cases())
def test_mfu_stays_in_zero_to_kernel_efficiency(case: Case) -> None:
    estimate = evaluate(case.job, case.layout)
    assert 0 < estimate.mfu <= 0.6


@PROPERTY_SETTINGS
@given(cases())
def test_more_tensor_parallelism_never_raises_memory(case: Case) -> None:
    # Doubling tp on the same GPUs halves dp; only meaningful when both stay whole.
    layout, model = case.layout, case.job.model
    dp = case.job.cluster.gpus // (layout.tp * layout.pp)
    if dp % 2 or model.num_attention_heads % (2 * layout.tp):
        return
    before = evaluate(case.job, layout)
    after = evaluate(case.job, with_degrees(case, tp=2 * layout.tp))
    assert after.memory.total <= before.memory.total * (1 + 1e-12)


@PROPERTY_SETTINGS
@given(cases())
def test_more_pipeline_parallelism_never_raises_memory(case: Case) -> None:
    layout, model = case.layout, case.job.model
    dp = case.job.cluster.gpus // (layout.tp * layout.pp)
    if dp % 2 or 2 * layout.pp * layout.vpp > model.num_layers:
        return
    before = evaluate(case.job, layout)
    after = evaluate(case.job, with_degrees(case, pp=2 * layout.pp))
    assert after.memory.total <= before.memory.total * (1 + 1e-12)


@PROPERTY_SETTINGS
@given(cases(), st.integers(2, 8))
def test_more_micro_batches_never_raise_the_bubble(case: Case, factor: int) -> None:
    bigger = case.job.training.global_batch * factor
    job = case.job.model_copy(update={"training": TrainingSpec(global_batch=bigger, seq_len=4096)})
    assert evaluate(job, case.layout).bubble <= evaluate(case.job, case.layout).bubble


@PROPERTY_SETTINGS
@given(cases())
def test_higher_zero_stages_never_raise_memory(case: Case) -> None:
    totals = [
        evaluate(case.job, case.layout.model_copy(update={"zero": stage})).memory.total
        for stage in range(4)
    ]
    assert totals == sorted(totals, reverse=True)
