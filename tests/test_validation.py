"""`layoutopt validate`: profile standard against published runs, within the error bound."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from api.cli import main
from api.cli.validate import (
    CALIBRATION_VIEWS,
    DOCS_CALIBRATE_N,
    calibration_markdown,
    markdown,
)
from optimizer.calibration.results import rms
from optimizer.validation import (
    MAX_ABS_ERROR_TARGET,
    MEAN_ABS_ERROR_TARGET,
    EngineCalibration,
    calibrate_engines,
    validate,
)
from optimizer.validation.calibrated import measured, spread
from optimizer.validation.report import ranked_degrees

REPO = Path(__file__).resolve().parents[1]


# The runs of issue 6 (the file's first rows), whose 3-point target the profile meets.
ISSUE_6_ROWS = 32


@pytest.fixture(scope="module")
def report():
    return validate()


def test_throughput_rows_compare_through_the_profiles_own_flops(report) -> None:
    # tokens/s and step time become an MFU on the profile's scale: the measured throughput
    # over the predicted one, times the predicted MFU
    for row in report.rows:
        est, run = row.estimate, row.run
        if run.metric == "tokens_per_s_per_gpu":
            assert row.reported == pytest.approx(est.mfu * run.reported / est.tokens_per_s_per_gpu)
        if run.metric == "step_time_s":
            assert row.reported == pytest.approx(est.mfu * est.step_time_s / run.reported)
        if run.metric == "model_tflops_per_gpu":
            assert row.reported == pytest.approx(run.reported / run.job.cluster.gpu.peak_tflops)


def test_fp8_rows_are_priced_in_fp8_and_excluded_rows_stay_out(report) -> None:
    fp8 = [row for row in report.rows if row.run.precision == "fp8"]
    assert fp8 and all(row.run.job.training.precision == "fp8" for row in fp8)
    assert all(row.estimate.mfu_fp8_peak is not None for row in fp8)
    assert all(row.run.group in ("priced", "excluded") for row in fp8)
    excluded = [row for row in report.rows if row.run.group == "excluded"]
    assert all(row.run.excluded_from_mean for row in excluded)
    # the means are over the priced rows that report a utilisation or throughput (a
    # memory-only row is in the memory mean alone)
    head = [row for row in report.rows if row.run.group == "priced" and row.compares_utilisation]
    assert any(row.run.precision == "fp8" for row in head)
    assert report.mean_abs_error == pytest.approx(sum(abs(row.error) for row in head) / len(head))
    assert all(row.rank is None for row in excluded)  # no evidence for the ranking


# Measured (docs/validation.md): the 11 FP8 rows, priced in bf16 before training.precision,
# were 24.64 points off on average (max 44.2, every one under-predicted); priced in FP8 they
# are 8.21 (max 15.52), the bf16 rows' size of error, which is why they joined the means;
# 5.45 (max 15.31) since NeMo 24.09's two and Megatron-Bridge's three Llama rows hide their
# tensor-parallel traffic as their userbuffers do (and two of the latter recompute nothing, as
# their recipes say); 4.61 over 16 (max 10.14) once NeMo 24.09's four Nemotron-4 FP8 rows and
# its GPT-3 175B one joined (+8.2, -3.3, +1.7, +1.2; +6.4); 4.14 (max 10.28) once GEMMs were
# priced by their measured shapes (docs/cost-model.md, "GEMMs by shape"). Bounds: the measured
# figures plus half a point.
FP8_MEAN_ABS_ERROR_BOUND = 0.0464
FP8_MAX_ABS_ERROR_BOUND = 0.1582


def test_fp8_rows_error_within_the_measured_bound(report) -> None:
    errors = [abs(row.error) for row in report.rows if row.run.precision == "fp8"
              and row.run.group == "priced" and row.compares_utilisation]  # fmt: skip
    assert len(errors) == 16
    assert sum(errors) / len(errors) <= FP8_MEAN_ABS_ERROR_BOUND
    assert max(errors) <= FP8_MAX_ABS_ERROR_BOUND


# --- the figures --------------------------------------------------------------------------

# Measured (docs/validation.md): the priced rows' mean absolute error is 5.45 points (5.51
# before Megatron-Core's nine weak-scaling rows joined, 4.96 over them) and their worst 34.96,
# against issue 15's targets of 3 and 8, which the profile does not meet. The
# bounds are the measured figures plus half a point: a change that makes them worse fails
# here. It was 7.77 before the six SC21 DeepSpeed ZeRO-3 rows were priced as 2021 DeepSpeed
# ran them (a blocking fetch: nothing hidden, 23.1 -> 11.1 points), torchtitan's eager
# kernels were charged (its eight bf16 rows, 8.0 -> 5.6; docs/cost-model.md, "Eager kernels")
# and NeMo 24.09's eight rows and Megatron-Bridge's four Llama rows hid their
# tensor-parallel traffic as their userbuffers do (6.0 -> 2.5 and 13.7 -> 5.8; "Tensor
# parallelism"), and the four rows whose runs name DeepEP or HybridEP send a token once per
# remote domain (8.6 -> 5.3; "Deduplicated dispatch"); 5.64 before each engine's loss kernels
# were charged at HBM bandwidth ("The loss"); 5.09 (max 21.0) once the experts' gradients
# crossed their own data-parallel group's links (5.50, max 34.7, before; "Mixture of experts");
# 4.92 once Megatron-Bridge's GB200 table rows took the racks of 64 its performance guide
# runs them on (Qwen3-235B's ep 32 all-to-all back on NVLink: -18.6 -> +4.7 points); 4.63
# once 2021 DeepSpeed's list all-gathers and reduce-scatters paid PyTorch's copy a rank (the
# six SC21 ZeRO-3 rows, +5.5..+15.0 -> +3.2..+10.4; "ZeRO-3 / FSDP"); 4.73 once those rows
# counted the collectives as DeepSpeed's code makes them, 4 gathers a pass and 12 scatters a
# layer, not one per submodule (+4.1..+11.6: the count follows the code, not the fit); 4.67
# once DeepSeek-V3's H100 row ran as its benchmark script does (selective recompute, DeepEP,
# no gradient-reduce overlap: -15.4 -> -10.1); 4.38 once NeMo 24.09's ten Nemotron-4 15B and
# 340B rows and three GPT-3 175B rows joined (2.3 and 3.8 mean over them) and NeMo 24.09's
# rows cut their gradients into Apex's fixed buckets (bucket_cap_mb), each paying its ring
# latency (70B on 2,048: +1.2 -> +0.5; Nemotron-4 15B on 2,048: +4.7 -> +0.8); 4.21 (max
# 21.49, GPT-OSS on GB200) once each GEMM pass was priced at its shape's measured throughput on
# H100 and B200 (XLA's table; "GEMMs by shape": Megatron-Core's 1.7B +10.7 -> +8.8, NeMo
# 24.09's GPT-3 175B rows -2.3..-3.4); 3.97 (max 20.78) once the optimiser step was priced
# (4.15 -> 4.09: Korthikanti's 22B on 8 A100s +3.7 -> +1.3) and DeepSpeed's ZeRO-3 gathered
# again in full recompute's replay (4.09 -> 3.97: SC21's six rows +2.4..+9.2).
MEAN_ABS_ERROR_BOUND = 0.0447
MAX_ABS_ERROR_BOUND = 0.2128
# peak memory over the priced rows: 9.2% mean absolute error over 7 (15.6% over 6 before
# Transformer Engine's FP8-saved GEMM inputs were priced and the three FP8 SFT rows took their
# recipe's bf16 gradients; 19.7% before that; the VPP 10 memory-only row, +10%, joined), bound 9.7%
MEMORY_MEAN_ERROR_BOUND = 0.097


def test_mean_error_within_the_measured_bound(report) -> None:
    # the error is recomputed here from the rows, not taken from the report's own summary
    head = [row for row in report.rows if row.run.group == "priced" and row.compares_utilisation]
    errors = [abs(row.predicted - row.reported) for row in head]
    assert len(errors) >= 50
    assert sum(errors) / len(errors) <= MEAN_ABS_ERROR_BOUND
    assert max(errors) == pytest.approx(report.max_abs_error)
    assert max(errors) <= MAX_ABS_ERROR_BOUND
    assert (MEAN_ABS_ERROR_TARGET, MAX_ABS_ERROR_TARGET) == (0.03, 0.08)
    memory = [abs(row.memory_error) for row in report.rows if row.run.group == "priced"
              and row.compares_memory]  # fmt: skip
    assert sum(memory) / len(memory) <= MEMORY_MEAN_ERROR_BOUND


def test_issue_6_rows_stay_within_their_target(report) -> None:
    rows = report.rows[:ISSUE_6_ROWS]
    assert rows[0].run.name.startswith("Megatron-LM SC21 GPT 1.7B")
    assert rows[-1].run.name.startswith("NVIDIA Megatron-Bridge Llama 3.1 405B on 256 GB200")
    # the 26 rows beside SC21's six DeepSpeed ZeRO-3 ones keep issue 6's 3-point target; those
    # six, priced with nothing hidden as 2021 DeepSpeed's blocking fetch ran them and still
    # over-predicted, are held to their measured 11.13-point mean plus half a point
    zero3 = [abs(row.error) for row in rows if "SC21 ZeRO-3" in row.run.name]
    rest = [abs(row.error) for row in rows if "SC21 ZeRO-3" not in row.run.name]
    assert (len(zero3), len(rest)) == (6, 26)
    assert sum(rest) / len(rest) <= MEAN_ABS_ERROR_TARGET
    assert sum(zero3) / len(zero3) <= 0.1163


def test_docs_state_the_targets_as_not_met(report) -> None:
    text = (REPO / "docs" / "validation.md").read_text()
    if report.mean_abs_error > MEAN_ABS_ERROR_TARGET:
        assert "**not yet met**" in text
        assert f"{100 * report.mean_abs_error:.2f} points" in text


# Published layouts of issue 6's rows the profile ranks below the optimiser's top 5.
KNOWN_RANK_MISSES = {
    "Megatron-LM SC21 PTD GPT 174.6B on 384 A100",
    "Megatron-LM SC21 PTD GPT 174.6B on 768 A100",
    # since collectives pay NCCL's per-step latency, smaller tp with some pp ranks first
    "Megatron-LM SC21 GPT 18.4B on 256 A100",
    # since the elementwise kernels pay their HBM traffic (replicated on every tp rank without
    # sequence parallelism, which SC21 predates) and A100's kernel efficiency follows its
    # higher matmul ceiling, tp 4 ranks above SC21's tp 8 by 1-3 points: within the error
    "Megatron-LM SC21 GPT 7.5B on 128 A100",
    "Megatron-LM SC21 GPT 39.1B on 512 A100",
}


def test_published_layouts_rank_in_the_top_five(report) -> None:
    # the rank comes from the exhaustive enumerator under each run's engine constraints
    rows = report.rows[:ISSUE_6_ROWS]
    misses = {row.run.name for row in rows if row.rank is None or row.rank > 5}
    assert misses == KNOWN_RANK_MISSES
    llama = [row.rank for row in report.rows if row.run.name.startswith("Llama 3")]
    assert all(rank is not None and rank <= 5 for rank in llama)
    # the new rows' misses are reported (docs/validation.md), not pinned here: measured 45 of
    # 74 in the top 5 since NeMo 24.09's rows hide 15/16 of their tensor-parallel traffic as
    # their recipe's userbuffers do (49 before: every rival layout is priced with that overlap
    # too, so larger tp ranks higher; 44 of 63 before the FP8 rows joined). The rank is not
    # issue 15's target, the gap is (test below); the bound is the measured count less one
    ranked = report.ranked_rows
    assert len(ranked) - len(report.top_rank_misses) >= 44
    # the gap: the median published layout is within 5% of the optimum (measured 0.0%)
    gaps = sorted(row.behind_best for row in ranked if row.behind_best is not None)
    assert report.median_gap == gaps[len(gaps) // 2] <= 0.05


def test_behind_best_is_the_shortfall_from_the_searched_optimum(report) -> None:
    # the published layout itself can do no better than its degrees' best layout, which can
    # do no better than the optimum: a published layout priced above the optimum would mean
    # the search missed a layout it allows
    for row in report.ranked_rows:
        if row.rank is None:  # priced over memory: not among the feasible layouts
            assert not row.estimate.fits, row.run.name
            continue
        assert row.degrees_best_mfu is not None and row.optimum_mfu is not None, row.run.name
        if row.estimate.fits:  # an infeasible published layout may price above the feasible
            assert row.estimate.mfu <= row.degrees_best_mfu * (1 + 1e-9), row.run.name
        assert row.degrees_best_mfu <= row.optimum_mfu, row.run.name
        assert row.behind_best == pytest.approx(1 - row.degrees_best_mfu / row.optimum_mfu)
        assert row.rank != 1 or row.behind_best == 0, row.run.name


def test_a_tuned_context_parallel_recipe_at_8k_ranks_in_the_top_five(report) -> None:
    # NVIDIA's tuned Llama 3.1 405B recipe runs cp 2 at 8,192 tokens; with cp free, the
    # optimiser must rank that choice among its best, not rule context parallelism out at 8K
    (row,) = [row for row in report.rows if "on 256 GB200, cp 2" in row.run.name]
    assert row.run.search.cp is None and row.run.job.training.seq_len == 8192
    assert row.run.degrees == (4, 8, 2, 4)
    # measured: 9th, 6.7% behind the optimum, tp 8 x cp 1 (since the row hides 15/16 of its
    # tensor-parallel traffic as NeMo's userbuffers do, every rival does too and ties multiply:
    # 11th and 12.8% behind before that; 14th and 5.4% before the hidden reduce-scatters'
    # SMs were charged). The gap is what is held
    assert row.rank is not None and row.rank <= 9
    assert row.behind_best is not None and row.behind_best <= 0.07
    # context parallelism is chosen at 8K, not ruled out: degree tuples with cp 2 stand among
    # the optimiser's first five (measured: 4th and 5th, behind tp 8 x cp 1)
    top_five = list(ranked_degrees(row.run, "standard"))[:5]
    assert any(cp >= 2 for _tp, _pp, cp, _dp in top_five)


def test_a_searched_layout_ranks_first(report) -> None:
    # BigScience chose BLOOM's tp 4 x pp 12 by measuring layouts on the cluster itself
    # (chronicles-prequel.md), not by rule; the optimiser's search must agree
    (row,) = [row for row in report.rows if "BLOOM" in row.run.name]
    assert row.run.degrees == (4, 12, 1, 8)
    assert row.run.job.cluster.gpu.inter_node_gb_s == 6.25  # 4 x 100 Gb/s per 8 GPUs
    assert row.rank == 1


def test_issue_6_layouts_fit(report) -> None:
    assert [row.run.name for row in report.rows[:ISSUE_6_ROWS] if not row.estimate.fits] == []
    # newer rows the profile prices over their GPU's memory are listed in the table ("no"):
    # 6 measured (7 before NeMo 24.09's rows priced Apex's bf16 gradients and int16 remainders;
    # 5 before DeepSeek-V3's H100 row took its script's selective recompute, not full)
    assert sum(not row.estimate.fits for row in report.rows) <= 6


@pytest.fixture(scope="module")
def views() -> list[tuple[str, tuple[EngineCalibration, ...]]]:
    # `make validate` writes four views of the calibration on 3 rows per engine, 90 s of fits
    # and leave-one-out refits here; the first view (20 s) is recomputed, the others come from
    # the same code
    title, selection, grouping = CALIBRATION_VIEWS[0]
    return [(title, calibrate_engines(DOCS_CALIBRATE_N, "standard", selection, grouping))]


def test_validate_calibrates_each_engine_and_checks_the_rest(views) -> None:
    _, results = views[0]  # the first rows of each engine
    engines = {r.engine for r in results}
    assert {"megatron", "nemo", "torchtitan", "deepspeed", "generic"} <= engines
    for r in results:
        if r.calibration is None:
            continue
        assert len(r.calibration_rows) == 3
        assert not {run.name for run in r.calibration_rows} & {
            row.run.name for row in r.held_out_after
        }
        assert len(r.held_out_before) == len(r.held_out_after) > 0
        assert all(row.run.engine_name == r.engine for row in r.held_out_after)
    assert spread(list(range(21)), 3) == [0, 10, 20]  # type: ignore[arg-type]


def test_the_views_calibrate_as_layoutopt_calibrate_does(views) -> None:
    # the views run `layoutopt calibrate`'s own procedure: each row of a fit predicted by the
    # calibration of the others (leave-one-out), and the whole fit dropped where that predicts
    # the rows no better than the defaults do
    _, results = views[0]
    for r in results:
        calibration = r.calibration
        assert calibration is not None and calibration.leave_one_out is not None, r.engine
        runs = [measured(run) for run in r.calibration_rows]
        defaults = rms([math.log(run.estimate().step_time_s / run.step_time_s) for run in runs])
        assert calibration.rms_log_error_before == pytest.approx(defaults, rel=1e-9)
        if calibration.fitted:
            assert calibration.loo_rms_log_error < defaults
    # nemo's first three rows (GB200, H100, B200) free an inter-node efficiency that predicts
    # each of them from the other two worse than the defaults: kept at its default, said why
    (nemo,) = [r for r in results if r.engine == "nemo"]
    assert nemo.calibration is not None and nemo.calibration.fitted == {}
    reason = nemo.calibration.pinned["inter_node_bandwidth_efficiency"]
    assert "no better than the defaults" in reason


def test_the_views_hold_a_fit_to_its_reach(views) -> None:
    # torchtitan's first three rows (Llama 3.1 8B on H100) fit its kernel efficiency; its
    # held-out rows, all on A100 under torchtitan 0.1.0, lie outside that fit's reach: each is
    # priced exactly as the defaults price it
    _, results = views[0]
    (titan,) = [r for r in results if r.engine == "torchtitan"]
    assert titan.calibration is not None and "kernel_efficiency" in titan.calibration.fitted
    assert {row.run.job.cluster.gpu.name for row in titan.held_out_after} == {"a100-80gb"}
    assert titan.within_reach == (False,) * len(titan.held_out_after)
    for before, after in zip(titan.held_out_before, titan.held_out_after, strict=True):
        assert after.estimate.step_time_s == before.estimate.step_time_s


SENTINEL = "@@ the calibration section @@"


def test_docs_validation_is_current(report, views) -> None:
    docs = (REPO / "docs" / "validation.md").read_text()
    before, after = markdown(report, [SENTINEL]).split(SENTINEL)
    stale = "docs/validation.md is stale: run `make validate`"
    assert docs.startswith(before) and docs.endswith(after), stale
    section = docs[len(before) : len(docs) - len(after)]
    assert section.startswith(calibration_markdown(views, DOCS_CALIBRATE_N).rstrip()), stale
    assert section.count("\n### By engine") == len(CALIBRATION_VIEWS), stale


def test_cli_writes_the_docs_markdown(
    report,
    views,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the CLI's own wiring and printing; the figures are the fixtures' (seconds to minutes
    # to compute again), which the tests above check
    import api.cli.validate as command

    assert main(["validate", "--profile", "nope"]) == 2
    monkeypatch.setattr(command, "validate", lambda profile: report)
    monkeypatch.setattr(command, "calibration_views", lambda n, profile: views)
    target = tmp_path / "validation.md"
    argv = ["validate", "--calibrate", str(DOCS_CALIBRATE_N), "--markdown", str(target)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "mean absolute error" in out and "Llama 3 405B" in out and "by engine:" in out
    assert "beyond the 8-point target" in out  # which rows, worst first
    assert "calibrated by engine" in out and "held-out rows" in out
    expected = markdown(report, [calibration_markdown(views, DOCS_CALIBRATE_N)])
    assert target.read_text() == expected


UNSTATED_KNOBS_CLAIM = "the profile's best for the printed degrees"


def test_rows_priced_at_their_best_knobs_are_at_the_searched_best(report) -> None:
    # a row whose source prints no micro-batch, interleaving or recomputation says it takes the
    # profile's best for its degrees; as the cost model changes, that best may move, and the
    # row must move with it rather than keep a stale choice
    claimed = [row for row in report.ranked_rows if UNSTATED_KNOBS_CLAIM in row.run.notes]
    assert len(claimed) >= 9
    for row in claimed:
        assert row.degrees_best_mfu is not None, row.run.name
        assert row.estimate.mfu == pytest.approx(row.degrees_best_mfu, rel=1e-6), row.run.name
