"""The published runs' data file: the figures as their sources print them, the schema every
row keeps, and what a row states about the code it ran (`layoutopt validate` compares them in
tests/test_validation.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from models.errors import InvalidSpec
from models.presets import gpu_presets
from optimizer.costmodel import CostAssumptions
from optimizer.engines import ENGINES, engine_assumptions, get_engine
from optimizer.validation import METRICS, compare, published_runs
from optimizer.validation.published import GIB, _run

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "models" / "presets" / "published_runs.json"

# The figures as the sources print them, typed here so that an edit of the data file
# cannot move the goalposts: (name fragment, metric, reported value).
PRINTED = [
    ("Llama 3 405B on 8,192 H100", "mfu", 0.43),  # Table 4 row 1
    ("Llama 3 405B on 16,384 H100, cp 1,", "mfu", 0.41),  # Table 4 row 2
    ("Llama 3 405B on 16,384 H100, cp 16", "mfu", 0.38),  # Table 4 row 3
    ("SC21 GPT 1008B on 3072 A100", "hfu", 0.52),  # SC21 Table 1: 163 TFLOP/s, 52%
    ("SC21 GPT 529.6B on 2520 A100", "hfu", 0.52),
    ("SC21 GPT 1.7B on 32 A100", "hfu", 0.44),
    ("Korthikanti 2022 GPT 1T on 512 A100", "mfu", 0.563),  # Table 5
    ("ZeRO-3 GPT 174.6B on 1536 A100", "hfu", 44 / 312),  # SC21 Table 2: 44 TFLOP/s
    # dgxc-benchmarking llama3.1 README: 1134.5 model TFLOP/s per GPU over GB200's 2,500 peak
    ("Llama 3.1 405B on 256 GB200, cp 2", "mfu", 1134.5 / 2500),
    # BLOOM training log, iteration 85376: 149.77 hardware TFLOP/s per GPU over A100's 312
    ("BLOOM 176B on 384 A100", "hfu", 149.77 / 312),
    # dgxc-benchmarking@143b90d llama3.1/README_8b.md, BF16 table, 8 GPUs: 59.37%
    ("NeMo 24.09 Llama 3.1 8B on 8 H100 (DGX Cloud benchmark, BF16)", "mfu", 0.5937),
    # README_405b.md, BF16 table, 2304 GPUs: 54.45%
    ("NeMo 24.09 Llama 3.1 405B on 2304 H100 (DGX Cloud benchmark, BF16)", "mfu", 0.5445),
    # Megatron-Bridge@067f987 performance-summary-archive.md l.238: 5824 tokens/s/GPU
    ("Megatron-Bridge GPT-OSS 120B on 64 H100, 26.04.01", "tokens_per_s_per_gpu", 5824),
    # the same file, l.568: DeepSeekV3 (w/o MTP), 256 GB200, BF16: 3139 tokens/s/GPU
    ("DeepSeek-V3 (without MTP) on 256 GB200", "tokens_per_s_per_gpu", 3139),
    # torchtitan benchmarks/llama3_h100_202412_torchtitan.md Table 1, FSDP: 5,762 TPS/GPU
    ("torchtitan Llama 3.1 8B on 8 H100, FSDP 8", "tokens_per_s_per_gpu", 5762),
    # Megatron-Bridge@5789a7a expert-parallel-overlap SKILL.md: overlap on, 20.9920 s
    ("Qwen3-30B-A3B on 16 H100, EP 16, expert-parallel overlap on", "step_time_s", 20.992),
    # NeMo Automodel docs/performance-summary.md: DeepSeek V3 on 256 H100, 8.18 s
    ("NeMo AutoModel DeepSeek-V3 on 256 H100", "step_time_s", 8.18),
]
# Peak memory as printed: (name fragment, value, unit)
PRINTED_MEMORY = [
    ("torchtitan Llama 3.1 8B on 8 H100, FSDP 8", 82.4, "GiB"),  # Table 1
    ("torchtitan Llama 3.1 8B on 128 H100, FSDP 128", 67.0, "GiB"),  # Table 3
    ("expert-parallel overlap on", 62.166, "GiB"),  # 'rank-0 peak allocated memory'
    ("SFT on 32 H100, FP8, TP 8, PP 4", 50.2, "GB"),  # memory-tuning SKILL.md
]


def only(fragment: str):
    exact = [run for run in published_runs() if run.name == fragment]
    runs = exact or [run for run in published_runs() if fragment in run.name]
    assert len(runs) == 1, fragment
    return runs[0]


@pytest.mark.parametrize(("fragment", "metric", "value"), PRINTED)
def test_data_file_holds_the_printed_figures(fragment: str, metric: str, value: float) -> None:
    run = only(fragment)
    assert (run.metric, run.reported) == (metric, pytest.approx(value, abs=1e-4))


@pytest.mark.parametrize(("fragment", "value", "unit"), PRINTED_MEMORY)
def test_data_file_holds_the_printed_peak_memory(fragment: str, value: float, unit: str) -> None:
    run = only(fragment)
    expected = value * GIB if unit == "GiB" else value
    assert run.reported_memory_gb == pytest.approx(expected)


def test_llama3_layouts_are_the_papers() -> None:
    llama = [run for run in published_runs() if run.name.startswith("Llama 3")]
    degrees = [(r.layout.tp, r.layout.cp, r.layout.pp, r.job.cluster.gpus) for r in llama]
    assert degrees == [(8, 1, 16, 8192), (8, 1, 16, 16384), (8, 16, 16, 16384)]
    assert [r.job.training.seq_len for r in llama] == [8192, 8192, 131072]


# --- the schema ---------------------------------------------------------------------------


def test_the_file_holds_enough_rows_of_each_kind() -> None:
    runs = published_runs()
    assert len(runs) >= 60
    assert sum(run.job.model.is_moe for run in runs) >= 8
    assert sum(run.reported_memory_gb is not None for run in runs) >= 8
    assert len({run.name for run in runs}) == len(runs)


def test_every_row_names_a_known_engine_a_precision_and_its_source() -> None:
    for run in published_runs():
        assert run.engine_name in ENGINES, run.name
        # at its version wherever the engine has versions
        assert not ENGINES[run.engine_name].versions or "@" in run.engine, run.name
        assert run.precision in ("bf16", "fp16", "fp8"), run.name
        assert len(run.source) > 20 and run.notes, run.name
        assert run.metric in (*METRICS, None), run.name


def test_every_row_resolves_and_prices() -> None:
    # the layout resolves against its job (dp derived and consistent), and every figure is
    # finite: what evaluate would refuse, the data file must not hold
    for run in published_runs():
        row = compare(run)
        assert row.estimate.layout.dp is not None, run.name
        if row.compares_utilisation:
            assert 0 < row.reported < 1.5 and 0 < row.predicted < 1, run.name
        if row.compares_memory:
            assert 1 < row.run.reported_memory_gb < run.job.cluster.gpu.memory_gb * 1.2


def test_a_row_that_names_an_unknown_engine_or_metric_is_refused() -> None:
    entry = json.loads(DATA.read_text())["runs"][0]
    with pytest.raises(Exception, match="unknown engine"):
        _run({**entry, "engine": "tensorflow"}, {})
    with pytest.raises(Exception, match="metric"):
        _run({**entry, "reported": {"metric": "speed", "value": 1}}, {})
    with pytest.raises(Exception, match="neither"):
        _run({**entry, "reported": {}}, {})
    with pytest.raises(Exception, match="unknown keys"):
        _run({**entry, "tflops": 1}, {})


def test_gpu_specs_of_rows_carry_their_source() -> None:
    for run in published_runs():
        gpu = run.job.cluster.gpu
        assert gpu.name in gpu_presets() or (gpu.source and len(gpu.source) > 40), run.name


def test_no_row_carries_an_assumption_and_a_row_that_does_is_refused() -> None:
    # a row is priced as a user asks: engine@version and the settings its source prints
    rows = json.loads(DATA.read_text())["runs"]
    assert not [row["name"] for row in rows if "assumptions" in row]
    with pytest.raises(InvalidSpec, match="no cost assumptions") as refused:
        _run({**rows[0], "assumptions": {"fused_attention": False}}, {})
    assert refused.value.field == "assumptions"


def test_megatron_rows_older_than_overlapped_pipeline_sends_price_them_exposed() -> None:
    # Megatron-LM gained overlap_p2p_comm on 2023-05-31 (f9283c5a8a): SC21's and Korthikanti's
    # rows ran code without it (megatron@v2.5, megatron@23.04), so the engine's default (hidden
    # with interleaving) must not apply to them; the Megatron-Core README rows (r0.8, 2024) keep
    # it
    older = [
        run
        for run in published_runs()
        if run.engine_name == "megatron" and run.source.startswith(("Narayanan", "Korthikanti"))
    ]
    assert len(older) == 21
    assert {run.engine for run in older} == {"megatron@v2.5", "megatron@23.04"}
    for run in older:
        priced = engine_assumptions(get_engine(run.engine, run.engine_settings), CostAssumptions())
        assert priced.pp_p2p_interleaved_overlap_fraction == 0, run.name
    newer = only("Megatron-Core GPT 177B on 2,304")
    priced = engine_assumptions(get_engine(newer.engine, newer.engine_settings), CostAssumptions())
    assert priced.pp_p2p_interleaved_overlap_fraction == 1
