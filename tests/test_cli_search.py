"""`layoutopt optimize` and `layoutopt pareto` as a user runs them: tables, JSON, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from api.schemas import SEARCH_EXAMPLE
from optimizer import Request
from optimizer.costmodel.assumptions import CostAssumptions
from optimizer.search import enumerator
from optimizer.search.problem import resolve_space
from optimizer.search.space import SearchSpace
from tests.helpers import plate_job
from tests.helpers import run_cli as run

# The plate under its own formulas and no engine's rules: the published layout is the optimum.
PLATE = [
    "--model",
    "llama3-405b",
    "--gpus",
    "16384",
    "--profile",
    "workshop",
    "--engine",
    "generic",
]


def test_optimize_table_names_layout_and_what_binds(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(["optimize", *PLATE], capsys)
    assert status == 0
    assert "status   optimal" in out and "proved optimal" in out
    assert "tp 8  pp 16  cp 1  dp 128  vpp 4" in out and "ZeRO-2  recompute none" in out
    assert "memory binds: 78.6 of 80 GB" in out
    # the rules whose relaxation would not help, by enumeration (tests/test_optimizer_relaxations)
    assert "relaxing would not raise MFU: kv_heads, node_size" in out


def test_optimize_json_from_spec_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "request.json"
    spec.write_text(json.dumps(SEARCH_EXAMPLE | {"engine": "generic"}))
    status, out, _ = run(["optimize", "--spec", str(spec), "--json"], capsys)
    answer = json.loads(out)
    assert status == 0 and answer["status"] == "optimal"
    assert answer["solver"]["proved_optimal"] is True
    layout = answer["best"]["layout"]
    assert (layout["tp"], layout["pp"], layout["vpp"], layout["zero"]) == (8, 16, 4, 2)
    assert answer["best"]["mfu"] == 0.4255  # the plate's 42.55%
    assert "memory_limit" in [b["name"] for b in answer["binding"]]
    relaxations = {r["name"]: r for r in answer["relaxations"]}
    assert {"memory_limit", "kv_heads", "max_vpp", "node_size"} <= set(relaxations)
    assert relaxations["memory_limit"]["binds"] and relaxations["memory_limit"]["relaxed_mfu"]
    assert not relaxations["node_size"]["binds"] and relaxations["node_size"]["relaxed"] is None


def test_pareto_json_matches_enumerated_frontier(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(["pareto", *PLATE, "--json"], capsys)
    frontier = json.loads(out)["frontier"]
    problem = resolve_space(plate_job(), SearchSpace(), "workshop")
    expected = enumerator.frontier_points(problem, CostAssumptions())
    assert status == 0
    assert [p["memory_gb"]["total"] for p in frontier] == [
        round(m / 1e9, 2) for m, _, _ in expected
    ]
    assert [p["mfu"] for p in frontier] == [round(mfu, 4) for _, mfu, _ in expected]


def test_pareto_text_chart_has_one_row_per_point(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(["pareto", *PLATE, "--max-vpp", "2", "--zero-stages", "2"], capsys)
    rows = [line for line in out.splitlines() if line.strip().endswith("placement tp<cp<pp<dp")]
    assert status == 0 and rows
    memories = [float(row.split()[0]) for row in rows]
    assert memories == sorted(memories)
    assert all("ZeRO-2" in row and "vpp 3" not in row for row in rows)


def test_infeasible_request_explains_the_conflict(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(
        ["optimize", "--model", "llama3-405b", "--gpus", "64", "--profile", "workshop"], capsys
    )
    assert status == 3  # proved infeasible: a script can branch on it
    assert "status   infeasible" in out and "proved infeasible" in out
    assert "no layout satisfies these rules together" in out and "GB > 80 GB" in out
    # without explanations the conflict is not worked out, and the answer says so
    args = ["optimize", "--model", "llama3-405b", "--gpus", "64", "--profile", "workshop"]
    status, out, _ = run([*args, "--no-explain"], capsys)
    assert status == 3 and "which rules conflict was not worked out" in out
    assert "rules together" not in out


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--zero-stages", "7"], "search.zero_stages.0: Input should be less than or equal to 3"),
        (["--memory-limit-gb", "-1"], "search.memory_limit_gb"),
        (["--vpp", "6", "--max-vpp", "4"], "vpp(6) exceeds max_vpp(4)"),
        (["--placement", "tp,pp"], "search.placement: Tuple should have at least 4 items"),
        (["--placement", "tp,pp,pp,dp"], "placement must order"),
        (["--schedules", "2f2b"], "search.schedules.0: Input should be '1f1b'"),
        (["--workers", "0"], "--workers must be at least 1"),
        (
            ["--model", "deepseek-v3-shaped", "--gpus", "16384", "--profile", "standard"]
            + ["--micro-batches", "1,2,4,8,16,32", "--max-vpp", "16", "--engine", "generic"],
            "search space too large: 421 (tp, pp, cp, dp) tuples",
        ),
    ],
)
def test_bad_search_flags_exit_2_with_the_field(
    flags: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = run(["optimize", *PLATE, *flags], capsys)
    assert status == 2 and out == ""
    assert message in err and "Traceback" not in err


@pytest.mark.parametrize("command", ["optimize", "pareto"])
def test_absurd_efficiency_exits_2_naming_the_assumptions(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # kernel_efficiency 1e-300 would overflow standard's step times to inf (MFU 0): refused
    # at the edge with the field, never a stack trace
    spec = tmp_path / "request.json"
    request = SEARCH_EXAMPLE | {"profile": "standard", "assumptions": {"kernel_efficiency": 1e-300}}
    spec.write_text(json.dumps(request))
    status, out, err = run([command, "--spec", str(spec)], capsys)
    assert status == 2 and out == ""
    assert "assumptions.kernel_efficiency: Input should be greater than or equal to 0.01" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("schedule", ["1f1b", "zero-bubble"])
def test_schedules_flag_restricts_the_search(
    schedule: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # the optimum under one allowed schedule is the enumerator's best under the same rule,
    # and the table names the schedule (a DualPipe layout read as 1F1B would be wrong)
    argv = [
        "--model",
        "llama3-70b",
        "--gpus",
        "256",
        "--profile",
        "standard",
        "--engine",
        "generic",
    ]
    status, out, _ = run(["optimize", *argv, "--schedules", schedule, "--json"], capsys)
    best = json.loads(out)["best"]
    problem = resolve_space(
        plate_job(256, "llama3-70b"), SearchSpace(schedules=[schedule]), "standard"
    )
    expected = enumerator.best_layout(problem, CostAssumptions())
    assert status == 0 and expected is not None
    assert best["layout"]["schedule"] == expected.schedule.value == schedule
    assert (best["layout"]["tp"], best["layout"]["pp"], best["layout"]["cp"]) == (
        expected.tp,
        expected.pp,
        expected.cp,
    )
    status, out, _ = run(["optimize", *argv, "--schedules", schedule], capsys)
    assert f"schedule {schedule}  micro-batch" in out


def test_fixed_vpp_beyond_the_default_bound_is_searched(capsys: pytest.CaptureFixture[str]) -> None:
    # workshop's default bound is the plate's 4 chunks; a user who fixes 6 asks for 6
    status, out, _ = run(["optimize", *PLATE, "--vpp", "6", "--json"], capsys)
    assert status == 0 and json.loads(out)["best"]["layout"]["vpp"] == 6


def test_even_stages_flag_keeps_every_chunk_alike(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(["optimize", *PLATE, "--even-stages", "--json"], capsys)
    answer = json.loads(out)
    layout = answer["best"]["layout"]
    assert status == 0 and 126 % (layout["pp"] * layout["vpp"]) == 0
    assert "even_stages" in [binding["name"] for binding in answer["binding"]]


def test_min_interleaved_pp_flag_is_the_engines_rule(capsys: pytest.CaptureFixture[str]) -> None:
    # Llama 3 70B on 64 H100s runs pp 2 x vpp 4 when free; Megatron-LM's pp > 2 refuses it
    job = ["--model", "llama3-70b", "--gpu", "h100-sxm", "--gpus", "64", "--global-batch", "256"]
    argv = ["optimize", *job, "--profile", "workshop", "--engine", "generic"]
    argv += ["--min-interleaved-pp", "3", "--json"]
    status, out, _ = run(argv, capsys)
    answer = json.loads(out)
    layout = answer["best"]["layout"]
    assert status == 0 and (layout["vpp"] == 1 or layout["pp"] >= 3)
    assert "min_interleaved_pp" in [binding["name"] for binding in answer["binding"]]
    status, _, err = run(["optimize", *job, "--min-interleaved-pp", "1"], capsys)
    assert status == 2 and "min_interleaved_pp" in err


def test_unfinished_explanations_do_not_read_as_nothing_binds() -> None:
    # with explanations cut short, "nothing we can relax" would be a claim nobody checked
    from dataclasses import replace

    from api.cli.render import optimize_text
    from api.schemas import optimize_out
    from optimizer.searches import optimize

    # the 8B model on 1,024 GPUs: nothing binds once every explanation is worked out
    result = optimize(Request(plate_job(1024, "llama3-8b"), profile="workshop", engine=None))
    assert result.explanations_complete and result.binding == ()
    finished = optimize_text(optimize_out(result))
    cut = optimize_text(optimize_out(replace(result, explanations_complete=False)))
    assert "  - nothing we can relax" in finished and "none found before" not in finished
    assert "  - none found before the time limit" in cut and "nothing we can relax" not in cut
    unexplained = optimize(
        Request(plate_job(1024, "llama3-8b"), profile="workshop", engine=None, explain=False)
    )
    assert not unexplained.explanations_complete and not unexplained.explained
    assert optimize_out(result).model_dump()["explanations_complete"] is True
    # explanations turned off are not explanations cut short
    off = optimize_text(optimize_out(unexplained))
    assert "  - not worked out: explanations off" in off and "time limit" not in off
    # nor are explanations the size guard skipped: the answer names them, their warnings say
    # why, the list says so
    from optimizer.explain import EXPLANATIONS_SKIPPED

    why = "node_size not relaxed: search space too large"
    warning = f"{EXPLANATIONS_SKIPPED}: {why}"
    skipped = replace(
        result, explanations_complete=False, warnings=(warning,), explanations_skipped=(why,)
    )
    text = optimize_text(optimize_out(skipped))
    assert "  - none among those worked out: some spaces are too large to search" in text
    assert "time limit" not in text and f"warning: {warning}" in text


def test_a_search_cut_short_before_any_layout_claims_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # no layout and no proof: neither "no layout satisfies these rules" nor "the frontier is
    # empty" may be printed, since neither was shown
    job = ["--model", "mixtral-8x7b", "--gpus", "256", "--time-limit-s", "0.000001"]
    _, out, _ = run(["optimize", *job], capsys)
    assert "none ruled out" in out and "satisfies these rules" not in out
    assert "infeasibility is NOT proved" in out
    _, out, _ = run(["pareto", *job], capsys)
    assert "frontier NOT proved" in out and "nothing is proved" in out
    assert "frontier is empty" not in out
