"""Calibration: known assumptions recovered from synthetic runs, what the runs cannot identify
pinned and said, leave-one-out worked by hand, the prior, and validate's calibrated views.
The CLI and HTTP round trips are in test_calibration_api.py."""

from __future__ import annotations

import math

import pytest

from api.schemas import EvaluateRequest
from models.job import TrainingJob
from models.layout import Layout
from models.presets import gpu_preset
from optimizer import Request, SolveSettings
from optimizer.calibration import MeasuredRun, calibrate, choose, measured_run, within_reach
from optimizer.calibration.parameters import PRIOR_SD_OF_RANGE, RUN_LOG_ERROR, prior_weight
from optimizer.calibration.reach import differences, regime_of
from optimizer.costmodel import CostAssumptions, attention_efficiency, evaluate, kernel_efficiency
from optimizer.costmodel.assumptions import CalibrationProvenance
from optimizer.engines import get_engine
from optimizer.searches import evaluate_on, optimize
from optimizer.validation import published_runs
from optimizer.validation.calibrated import GROUPINGS, measured
from optimizer.validation.report import compare
from tests.helpers import engine_or_none, plate_job

TRUTH = {
    "kernel_efficiency": 0.5,
    "attention_kernel_efficiency": 0.45,
    "inter_node_bandwidth_efficiency": 0.6,
    "tp_overlap_fraction": 0.4,
}
# (gpus, model, layout, seq_len): runs that differ in tp, in sequence length (attention's
# share) and in how much traffic crosses nodes, and over how many of a node's NICs
SHAPES = [
    (64, "llama3-8b", {"tp": 1}, 8192),
    (64, "llama3-8b", {"tp": 2}, 8192),
    (64, "llama3-8b", {"tp": 4}, 8192),
    (64, "llama3-8b", {"tp": 8}, 8192),
    (64, "llama3-8b", {"tp": 1, "cp": 2}, 32768),
    (256, "llama3-70b", {"tp": 8, "pp": 4, "vpp": 5}, 8192),
    (128, "llama3-70b", {"tp": 8, "pp": 2}, 4096),
    # one rank a node: the context-parallel all-gather crosses each node's one NIC, exposed
    (64, "llama3-8b", {"tp": 8, "cp": 8}, 32768),
]


def synthetic(truth: dict[str, float], shapes=SHAPES, measure: str = "step_time_s") -> list:
    """Runs 'measured' as the cost model prices them under `truth`."""
    runs = []
    for i, (gpus, model, degrees, seq) in enumerate(shapes):
        job = plate_job(gpus, model, global_batch=min(2 * gpus, 256), seq_len=seq)
        layout = Layout(**degrees, zero=1, recompute="selective")
        est = evaluate(job, layout, "standard", CostAssumptions(**truth))
        value = {"step_time_s": est.step_time_s, "mfu": est.mfu}[measure]
        runs.append(
            measured_run(
                f"run {i}",
                Request(job, layout=layout, engine=get_engine("generic")),
                measure,
                value,
            )
        )
    return runs


@pytest.fixture(scope="module")
def recovered():
    # the fit's mechanics on noise-free runs, without the prior's pull (test_the_prior_...)
    return calibrate(synthetic(TRUTH), leave_one_out=False, regularisation=0.0)


@pytest.mark.parametrize(("name", "tolerance"), [(k, 0.02) for k in TRUTH])
def test_calibration_recovers_known_assumptions(recovered, name: str, tolerance: float) -> None:
    # the regulariser pulls towards the defaults, lightly: within 0.02 of the truth
    assert recovered.fitted[name] == pytest.approx(TRUTH[name], abs=tolerance)


def test_the_recovered_fit_reproduces_the_runs(recovered) -> None:
    assert recovered.rms_log_error_before > 0.05  # the defaults miss the synthetic truth
    assert recovered.rms_log_error < 0.002
    # what nothing measures stays at its default and says why
    assert "no run uses ZeRO-3" in recovered.pinned["zero3_overlap_fraction"]
    assert "no run has ep > 1" in recovered.pinned["moe_all_to_all_overlap_fraction"]
    # cp varies now, but its exposed exchange moves the step as the network's efficiency does
    assert "cannot tell them apart" in recovered.pinned["cp_overlap_fraction"]


def test_an_mfu_measurement_is_the_same_step_time() -> None:
    by_time = synthetic(TRUTH, SHAPES[:3])
    by_mfu = synthetic(TRUTH, SHAPES[:3], measure="mfu")
    for a, b in zip(by_time, by_mfu, strict=True):
        assert b.step_time_s == pytest.approx(a.step_time_s, rel=1e-9)


@pytest.mark.parametrize("profile", ["standard", "workshop"])
def test_mfu_times_step_time_does_not_move_with_the_assumptions(profile: str) -> None:
    # what lets an MFU stand for a step time: model FLOPs are the job's, not an assumption's
    job, layout = plate_job(64, "llama3-8b"), Layout(tp=2, zero=1)
    products = {
        round(e.mfu * e.step_time_s, 9)
        for e in (
            evaluate(job, layout, profile, CostAssumptions(kernel_efficiency=k)) for k in (0.3, 0.7)
        )
    }
    assert len(products) == 1


def test_one_run_fits_the_kernel_efficiency_alone() -> None:
    (run,) = synthetic(TRUTH, SHAPES[1:2])
    result = calibrate([run], regularisation=0.0)
    assert list(result.fitted) == ["kernel_efficiency"]
    assert result.rms_log_error < 1e-3  # one equation, one unknown
    assert "1 run fit at most 1" in result.pinned["attention_kernel_efficiency"]
    assert result.leave_one_out is None and result.leave_one_out_note
    # the file holds it as a share of these runs' GPU's peak: the report says how to carry it
    (note,) = result.transfer_notes
    fitted, default = (
        result.fitted["kernel_efficiency"],
        kernel_efficiency(run.job, CostAssumptions()),
    )
    assert note.startswith(f"kernel_efficiency {fitted:.4g} is a share of the h100-sxm peak")
    assert f"{fitted / default:.3g} times its default there ({default:.4g})" in note


def test_n_runs_fit_at_most_n_minus_one_assumptions() -> None:
    # three runs that differ in tp and sequence length could tell three assumptions apart,
    # but a fit of three unknowns to three runs passes through all of them: two at most
    runs = synthetic(TRUTH, SHAPES[2:5])
    freed, _, pinned = choose(runs)
    assert len(freed) == 2
    third = next(name for name, why in pinned.items() if "fit at most" in why)
    assert "3 runs fit at most 2 assumptions, freed in order" in pinned[third]
    assert "so that the fit is not exact" in pinned[third]
    result = calibrate(runs, leave_one_out=False)
    assert len(result.fitted) <= 2 and third not in result.fitted


def test_a_fit_at_its_bound_is_pinned_not_kept() -> None:
    # a run ten times slower than its defaults: no kernel efficiency in [0.2, 0.95] explains
    # it, the fit stops at 0.2, and a bound is no estimate: nothing is fitted, and it says so
    job, layout = plate_job(16, "llama3-8b", global_batch=64), Layout(tp=2, zero=1)
    slow = 10 * evaluate(job, layout, "standard").step_time_s
    run = measured_run(
        "slow",
        Request(job, layout=layout, engine=get_engine("megatron")),
        "step_time_s",
        slow,
    )
    result = calibrate([run])
    assert result.fitted == {}
    assert "its lower bound" in result.pinned["kernel_efficiency"]
    assert result.assumptions().get("kernel_efficiency") is None


def test_moe_runs_at_three_micro_batch_sizes_tell_host_time_from_kernels(recovered) -> None:
    # an eager MoE layer's host time is the same at any micro-batch, its kernels' time grows
    # with the tokens: three micro-batch sizes tell the two apart, and both come back
    truth = {"kernel_efficiency": 0.5, "moe_host_ms_per_layer": 2.0}
    runs = []
    for micro_batch in (1, 2, 4):
        job = plate_job(64, "mixtral-8x7b", global_batch=256, seq_len=4096)
        layout = Layout(tp=2, pp=4, ep=8, micro_batch=micro_batch, zero=1, recompute="full")
        step_s = evaluate(job, layout, "standard", CostAssumptions(**truth)).step_time_s
        runs.append(
            measured_run(
                f"mb {micro_batch}",
                Request(job, layout=layout, engine=get_engine("megatron")),
                "step_time_s",
                step_s,
            )
        )
    result = calibrate(runs, leave_one_out=False, regularisation=0.0)
    assert result.fitted["kernel_efficiency"] == pytest.approx(0.5, abs=0.005)
    assert result.fitted["moe_host_ms_per_layer"] == pytest.approx(2.0, abs=0.05)
    # at one micro-batch size it is pinned, and dense runs never depend on it
    _, _, pinned = choose(runs[:1] * 2)
    assert "do not vary tokens a micro-batch" in pinned["moe_host_ms_per_layer"]
    assert "no run has MoE layers" in recovered.pinned["moe_host_ms_per_layer"]


def test_the_prior_pulls_few_runs_harder_than_many() -> None:
    # one, three and nine copies of a run 20% slower than its defaults: without the prior a
    # fit explains the whole gap at any count; with it the fitted efficiency lies between the
    # default and that, the nearer the default the fewer the runs (the weight falls as 1/n)
    job, layout = plate_job(16, "llama3-8b", global_batch=64), Layout(tp=2, zero=1)
    slow = 1.2 * evaluate(job, layout, "standard").step_time_s
    run = measured_run("r", Request(job, layout=layout, engine=get_engine("megatron")), "step_time_s", slow)  # fmt: skip
    exact = calibrate([run], regularisation=0.0).fitted["kernel_efficiency"]
    pulled = [calibrate([run] * n, leave_one_out=False).fitted for n in (1, 3, 9)]
    efficiencies = [fit["kernel_efficiency"] for fit in pulled]
    assert exact < efficiencies[2] < efficiencies[1] < efficiencies[0] < 0.6
    assert prior_weight(3) == pytest.approx(RUN_LOG_ERROR**2 / (3 * PRIOR_SD_OF_RANGE**2))


def log_errors_by_source() -> dict[str, list[float]]:
    """The defaults' log errors of the published priced rows, by engine, source and GPU type."""
    groups: dict[str, list[float]] = {}
    for run in published_runs():
        if run.group == "priced" and run.metric is not None:
            row = compare(run)
            groups.setdefault(GROUPINGS["source"](run), []).append(
                math.log(row.predicted / row.reported)
            )
    return groups


def test_the_priors_run_error_is_the_spread_validation_measures_within_a_source() -> None:
    # RUN_LOG_ERROR is the spread of the defaults' log errors about their mean within each
    # source and GPU type of the published rows, sum of squares over n - groups
    groups = log_errors_by_source()
    squares = sum(sum((x - sum(xs) / len(xs)) ** 2 for x in xs) for xs in groups.values())
    freedom = sum(len(xs) - 1 for xs in groups.values())
    assert pytest.approx(math.sqrt(squares / freedom), abs=0.02) == RUN_LOG_ERROR


def test_runs_at_one_dp_leave_the_dp_overlap_at_its_default() -> None:
    # three runs at dp 8 (tp 1, 2, 4 on 8, 16, 32 GPUs): nothing tells the dp overlap apart
    shapes = [(8 * tp, "llama3-8b", {"tp": tp}, 8192) for tp in (1, 2, 4)]
    runs = synthetic({**TRUTH, "dp_overlap_microbatches": 0.0}, shapes)
    freed, _, pinned = choose(runs)
    assert "dp_overlap_microbatches" not in [p.name for p in freed]
    reason = pinned["dp_overlap_microbatches"]
    assert "do not vary dp (all 8)" in reason or "at most 3" in reason
    result = calibrate(runs, leave_one_out=False)
    assert "dp_overlap_microbatches" not in result.assumptions()


def test_assumptions_a_request_states_are_facts_not_fitted() -> None:
    runs = synthetic(TRUTH, SHAPES[:3])
    stated = CostAssumptions(tp_overlap_fraction=0.4, sequence_parallel=False)
    runs = [
        measured_run(
            r.name,
            Request(
                r.job,
                layout=r.layout,
                profile=r.profile,
                assumptions=stated,
                engine=engine_or_none(r.engine),
            ),
            "step_time_s",
            r.value,
        )
        for r in runs
    ]
    result = calibrate(runs, leave_one_out=False)
    assert "stated by the request" in result.pinned["tp_overlap_fraction"]
    out = result.assumptions()
    # what every run states comes along; the file is a valid `assumptions` as it stands
    assert out["sequence_parallel"] is False and out["tp_overlap_fraction"] == 0.4
    request = EvaluateRequest.model_validate(
        {"model": "llama3-8b", "cluster": {"gpus": 8}, "assumptions": out}
    )
    assert request.assumptions.kernel_efficiency_scale == out["kernel_efficiency_scale"]


@pytest.fixture(scope="module")
def three_runs_fit():
    """Three H100 runs of llama3-8b under the generic engine, fitted (kernel_efficiency)."""
    return calibrate(synthetic(TRUTH, SHAPES[:3]), leave_one_out=False)


def test_the_file_holds_a_fitted_efficiency_as_its_ratio(three_runs_fit) -> None:
    # fitted on H100 runs, the kernel efficiency is a share of H100's peak; the file holds its
    # ratio to H100's default, which prices the fitted share there
    fitted = three_runs_fit.fitted["kernel_efficiency"]
    out = three_runs_fit.assumptions()
    assert "kernel_efficiency" not in out
    h100 = plate_job(64, "llama3-8b")
    ratio = fitted / kernel_efficiency(h100, CostAssumptions())
    assert out["kernel_efficiency_scale"] == pytest.approx(ratio, abs=5e-5)
    written = CostAssumptions.model_validate(out)
    assert kernel_efficiency(h100, written) == pytest.approx(fitted, abs=5e-5)


def test_leave_one_out_by_hand() -> None:
    # three measurements of one and the same run: the fit could only move the kernel
    # efficiency, and a fit of two measurements predicts their geometric mean. Each run left
    # out is then predicted at the geometric mean of the other two, which misses more than the
    # defaults do: the kernel efficiency is pinned, and every prediction is the default's
    job, layout = plate_job(16, "llama3-8b", global_batch=64), Layout(tp=2, zero=1)
    # every second of the step scales with the kernel efficiency: no hidden sync's
    # contention, which does not (stated, so the fit leaves it)
    uncontended = CostAssumptions(overlap_compute_slowdown=0.0)
    base = evaluate(job, layout, "standard", uncontended).step_time_s
    factors = [0.95, 1.0, 1.08]
    runs: list[MeasuredRun] = [
        measured_run(
            f"r{i}",
            Request(job, layout=layout, assumptions=uncontended, engine=get_engine("generic")),
            "step_time_s",
            f * base,
        )
        for i, f in enumerate(factors)
    ]
    result = calibrate(runs, regularisation=0.0)
    assert result.fitted == {}
    defaults_rms = math.sqrt(sum(math.log(1 / f) ** 2 for f in factors) / 3)  # 0.0533
    others = [[g for j, g in enumerate(factors) if j != i] for i in range(3)]
    fitted_rms = math.sqrt(  # 0.0790
        sum(math.log(math.sqrt(a * b) / f) ** 2 for (a, b), f in zip(others, factors, strict=True))
        / 3
    )
    reason = result.pinned["kernel_efficiency"]
    assert f"{defaults_rms:.4f} with 0 freed" in reason and f"{fitted_rms:.4f} with 1" in reason
    assert result.leave_one_out is not None
    for left in result.leave_one_out:
        assert left.predicted_s == pytest.approx(base, rel=1e-9) and left.fitted == ()
    assert result.loo_rms_log_error == pytest.approx(defaults_rms, rel=1e-6)


def test_leave_one_out_keeps_what_predicts_better() -> None:
    # runs priced under a kernel efficiency of 0.5 (the default is 0.6 on H100): a fit of
    # any two predicts the third, so the kernel efficiency is kept and recovered
    runs = synthetic({"kernel_efficiency": 0.5}, shapes=SHAPES[:3])
    result = calibrate(runs, regularisation=0.0)
    assert result.fitted["kernel_efficiency"] == pytest.approx(0.5, abs=0.01)
    assert result.loo_rms_log_error is not None and result.loo_rms_log_error < 0.01


def test_published_rows_read_as_measured_runs() -> None:
    for run in published_runs():
        if run.metric is None or run.group != "priced":
            continue
        m = measured(run)
        est = evaluate(run.job, run.layout, "standard", run.assumptions)
        # the row's reported utilisation, as an MFU, is the measured run's
        if run.metric in ("mfu", "tokens_per_s_per_gpu", "step_time_s"):
            from optimizer.validation import compare

            assert m.measured_mfu == pytest.approx(compare(run).reported, rel=1e-9), run.name
        assert m.step_time_s > 0 and est.step_time_s > 0


@pytest.mark.parametrize(("engine", "zero"), [("torchtitan", 3), ("megatron", 1), ("deepspeed", 3)])
def test_a_run_is_priced_as_its_engine_runs_it(engine: str, zero: int) -> None:
    # the fit starts from the step time evaluate gives the same request (its engine's gradient
    # sync, kernels and overlaps), not from an engine-agnostic price of it
    # (cp 2: megatron hides its context-parallel exchange, the others do not)
    job, layout = plate_job(64, "llama3-8b", global_batch=128), Layout(tp=2, cp=2, zero=zero)
    run = measured_run(
        "r",
        Request(job, layout=layout, engine=engine_or_none(engine)),
        "step_time_s",
        1.0,
    )
    as_evaluated = evaluate_on(
        Request(job, layout=layout, engine=engine_or_none(engine))
    ).step_time_s
    assert run.estimate().step_time_s == pytest.approx(as_evaluated, rel=1e-12)
    agnostic = evaluate(job, layout, "standard", CostAssumptions()).step_time_s
    assert as_evaluated != pytest.approx(agnostic, rel=1e-3)  # the engine changes the price


def on_gpu(job: TrainingJob, gpu: str) -> TrainingJob:
    cluster = job.cluster.model_copy(update={"gpu": gpu_preset(gpu)})
    return job.model_copy(update={"cluster": cluster})


def in_precision(job: TrainingJob, precision: str) -> TrainingJob:
    training = job.training.model_copy(update={"precision": precision})
    return job.model_copy(update={"training": training})


def test_a_fitted_value_applies_only_within_its_reach(three_runs_fit) -> None:
    # three H100 bf16 runs of a dense model under the generic engine, at 8,192 tokens: the file
    # names all that; a request sharing it is priced with the fitted value, one on another GPU,
    # in another precision or under another engine with the default, and told so
    out = three_runs_fit.assumptions()
    assert out["calibrated_on"] == {
        "gpus": ["h100-sxm"],
        "engines": ["generic"],
        "runs": 3,
        "fitted": ["kernel_efficiency"],
        "engine_versions": ["generic"],
        "precisions": ["bf16"],
        "architectures": ["dense"],
        "seq_lens": [8192],
        "hidden_sizes": [4096],
    }
    written = CostAssumptions.model_validate(out)
    scale = CostAssumptions(kernel_efficiency_scale=out["kernel_efficiency_scale"])
    layout = Layout(tp=2, zero=1)
    h100 = plate_job(64, "llama3-8b", global_batch=128)

    def priced(job: TrainingJob, assumptions: CostAssumptions, engine: str = "generic"):
        request = Request(job, layout=layout, assumptions=assumptions, engine=get_engine(engine))
        return evaluate_on(request)

    # within: the fitted ratio prices it, as the same ratio stated by hand does; no note
    within = priced(h100, written)
    assert within.step_time_s == pytest.approx(priced(h100, scale).step_time_s, rel=1e-12)
    assert within.step_time_s != pytest.approx(priced(h100, CostAssumptions()).step_time_s)
    assert not any(w.startswith("kernel_efficiency") for w in within.warnings)
    # outside: priced as with no calibration at all, the note naming the assumption and how
    # the request differs
    outside = {
        "a100-80gb": (on_gpu(h100, "a100-80gb"), "generic"),
        "fp8": (in_precision(h100, "fp8"), "generic"),
        "torchtitan@0.3.0": (h100, "torchtitan"),
    }
    for differs, (job, engine) in outside.items():
        estimate = priced(job, written, engine)
        assert estimate.step_time_s == priced(job, CostAssumptions(), engine).step_time_s
        assert estimate.step_time_s != pytest.approx(priced(job, scale, engine).step_time_s)
        (note,) = [w for w in estimate.warnings if w.startswith("kernel_efficiency")]
        assert differs in note and "its default prices it" in note, note
    # the search holds the file to its reach too: its optimum on A100 is priced as the
    # defaults price that layout
    a100 = on_gpu(h100, "a100-80gb")
    searched = optimize(
        Request(a100, assumptions=written, engine=None, explain=False),
        SolveSettings(time_limit_s=20),
    )
    assert any(w.startswith("kernel_efficiency") for w in searched.warnings)
    assert searched.best is not None
    unfitted = evaluate_on(Request(a100, layout=searched.best.layout, engine=None))
    assert searched.best.mfu == pytest.approx(unfitted.mfu, rel=1e-9)


def test_reach_by_engine_version_model_kind_and_sequence_length() -> None:
    # a file fitted under megatron@core_r0.20.0 on dense runs of llama3-8b (hidden size 4,096)
    # at 4,096 to 8,192 tokens: each fitted value is held to the engine version and the kind of
    # model, the kernel efficiency also to the runs' hidden sizes (GEMM shapes), the attention
    # efficiency to their sequence lengths
    origin = CalibrationProvenance(
        gpus=["h100-sxm"],
        engines=["megatron"],
        runs=3,
        fitted=["kernel_efficiency", "attention_kernel_efficiency"],
        engine_versions=["megatron@core_r0.20.0"],
        precisions=["bf16"],
        architectures=["dense"],
        seq_lens=[4096, 8192],
        hidden_sizes=[4096],
    )
    megatron = get_engine("megatron")  # the bare name: its newest version
    assert megatron.spec == "megatron@core_r0.20.0"
    at = regime_of(plate_job(64, "llama3-8b", seq_len=8192), megatron)
    assert differences("kernel_efficiency", origin, at) == []
    assert differences("attention_kernel_efficiency", origin, at) == []
    older = regime_of(plate_job(64, "llama3-8b", seq_len=8192), get_engine("megatron@core_r0.8.0"))
    assert differences("kernel_efficiency", origin, older) == [
        "it runs megatron@core_r0.8.0, not megatron@core_r0.20.0"
    ]
    moe = regime_of(plate_job(64, "mixtral-8x7b", seq_len=8192), megatron)
    assert differences("kernel_efficiency", origin, moe) == ["its model is moe, not dense"]
    wider = regime_of(plate_job(64, "llama3-70b", seq_len=8192), megatron)
    assert differences("kernel_efficiency", origin, wider) == [
        "its hidden size is 8,192, the runs' 4,096"
    ]
    assert differences("attention_kernel_efficiency", origin, wider) == []
    long_job = plate_job(64, "llama3-8b", seq_len=32768)
    longer = regime_of(long_job, megatron)
    assert differences("kernel_efficiency", origin, longer) == []
    assert differences("attention_kernel_efficiency", origin, longer) == [
        "its sequence is 32,768 tokens, the runs' 4,096 to 8,192 tokens"
    ]
    # the request at 32,768 tokens: the attention efficiency dropped, the kernel one kept
    assumptions = CostAssumptions(
        kernel_efficiency_scale=0.9, attention_kernel_efficiency_scale=0.8, calibrated_on=origin
    )
    reach = within_reach(assumptions, long_job, megatron)
    assert reach.dropped == ("attention_kernel_efficiency",)
    assert reach.assumptions.kernel_efficiency_scale == 0.9
    assert "attention_kernel_efficiency_scale" not in reach.assumptions.model_fields_set
    assert attention_efficiency(long_job, reach.assumptions) == attention_efficiency(
        long_job, CostAssumptions()
    )
    # a file written before the regime was recorded is judged on what it records
    old = origin.model_copy(
        update={"engine_versions": None, "precisions": None, "architectures": None}
    )
    assert differences("kernel_efficiency", old, older) == []
    assert differences("kernel_efficiency", old, moe) == []
