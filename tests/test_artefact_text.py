"""Request text never becomes a line of a launch artefact: a model name carrying line breaks,
shell syntax or quotes leaves every engine's artefact with the lines, commands and overrides
of a plainly named one (models/text.py). A request naming its model so is refused at the
edge; a Hugging Face config's own `_name_or_path` is imported as one printable line."""

from __future__ import annotations

import io
import json
import subprocess
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from hydra.core.override_parser.overrides_parser import OverridesParser

from models.job import TrainingJob
from models.layout import resolve_layout
from models.text import NAME_MAX_CHARS, one_line
from optimizer.engines import ENGINES, export, get_engine
from tests.engine_cases import CASES, Case, command_line
from tests.helpers import run_cli as run

HOSTILE = [
    "x\nrm -rf y",
    "x\r\n--tensor-model-parallel-size 1",
    "x\u2028y\u2029z",
    "x\x85y\x0bz\x0c\x1c",
    "x\x1b[2Jy\u202e",
    "$(touch PWNED)",
    "`touch PWNED`",
    'it\'s "quoted" \\',
    "model.tensor_model_parallel_size=1\nmodel.sequence_parallel=false",
]
ONE_CASE_PER_ENGINE = [next(c for c in CASES if c.engine == name) for name in ENGINES]
SHELL_ENGINES = ("megatron", "torchtitan")
JSON_ENGINES = ("deepspeed", "generic")


def named(job: TrainingJob, name: str) -> TrainingJob:
    """`job` with its model so named, unvalidated: as if a spec reached the exporter by a
    path that skipped the edge's check."""
    return job.model_copy(update={"model": job.model.model_copy(update={"name": name})})


def artefact_text(case: Case, name: str) -> str:
    job = named(case.job, name)
    return export(get_engine(case.engine), job, resolve_layout(case.layout, job)).text


def not_comments(text: str) -> list[str]:
    return [line for line in text.splitlines() if not line.startswith("#")]


def shell_words(text: str, cwd: Path) -> bytes:
    """The artefact's words as bash reads them, run for real (an array's elements, so its
    comments and continuations are bash's own), NUL-separated."""
    script = f"args=(\n{text})\nprintf '%s\\0' \"${{args[@]}}\"\n"
    parsed = subprocess.run(["bash", "-n"], input=script.encode(), capture_output=True)
    assert parsed.returncode == 0, parsed.stderr
    ran = subprocess.run(["bash"], input=script.encode(), capture_output=True, cwd=cwd)
    assert ran.returncode == 0 and ran.stderr == b"", ran.stderr
    return ran.stdout


def hydra_overrides(text: str) -> dict[str, object]:
    """The file as its header says to pass it (one argument per line, comments dropped),
    read by Hydra's own override parser."""
    lines = [line for line in not_comments(text) if line]
    return {o.key_or_group: o.value() for o in OverridesParser.create().parse_overrides(lines)}


@pytest.mark.parametrize("case", ONE_CASE_PER_ENGINE, ids=lambda c: c.engine)
def test_a_hostile_model_name_adds_no_line_to_any_artefact(case: Case, tmp_path: Path) -> None:
    plain = artefact_text(case, "plain")
    for name in HOSTILE:
        text = artefact_text(case, name)
        # str.splitlines breaks at every line boundary Unicode knows (\r, \x85, \u2028, ...)
        assert len(text.splitlines()) == len(plain.splitlines()), name
        assert text.count("\n") == plain.count("\n"), name
        assert not_comments(text) == not_comments(plain), name
        if case.engine in SHELL_ENGINES:
            assert shell_words(text, tmp_path) == shell_words(plain, tmp_path), name
            assert command_line(text) == command_line(plain)
        elif case.engine == "nemo":
            assert hydra_overrides(text) == hydra_overrides(plain), name
        else:
            assert json.loads(text) == json.loads(plain), name
    assert not (tmp_path / "PWNED").exists()


def test_the_name_stays_readable_and_bounded_in_the_comment() -> None:
    case = ONE_CASE_PER_ENGINE[0]
    header = artefact_text(case, "x\nrm -rf y\u2028").splitlines()[0]
    assert "for x\\nrm -rf y\\u2028 on" in header
    long = artefact_text(case, "\n" * 10_000).splitlines()[0]
    assert f"for {one_line(chr(10) * 10_000)} on" in long
    assert len(one_line("\n" * 10_000)) == NAME_MAX_CHARS


# --- at the edge: HTTP and the CLI ----------------------------------------------------------

LLAMA3_70B_HF = {  # meta-llama/Meta-Llama-3-70B config.json, the fields the import reads
    "model_type": "llama",
    "num_hidden_layers": 80,
    "hidden_size": 8192,
    "intermediate_size": 28672,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
    "tie_word_embeddings": False,
}

LLAMA3_70B_SPEC = {
    "name": "llama3-70b",
    "num_layers": 80,
    "hidden_size": 8192,
    "ffn_hidden_size": 28672,
    "num_attention_heads": 64,
    "num_kv_heads": 8,
    "vocab_size": 128256,
}


def evaluate_body(model: object, engine: str) -> dict[str, object]:
    return {
        "model": model,
        "cluster": {"gpus": 1024, "gpu": "h100-sxm"},
        "training": {"global_batch": 1024, "seq_len": 8192},
        "layout": {"tp": 8, "pp": 4, "vpp": 5, "zero": 1},
        "engine": engine,
    }


def hf_config(name: str) -> dict[str, object]:
    return {**LLAMA3_70B_HF, "_name_or_path": name}


@pytest.mark.parametrize("engine", ["megatron", "nemo"])
def test_an_hf_configs_hostile_name_is_imported_as_one_line(api: TestClient, engine: str) -> None:
    plain = api.post("/v1/evaluate", json=evaluate_body(hf_config("meta-llama/x"), engine))
    assert plain.status_code == 200, plain.text
    for name in HOSTILE:
        answer = api.post("/v1/evaluate", json=evaluate_body(hf_config(name), engine))
        assert answer.status_code == 200, answer.text
        text, plain_text = answer.json()["export"]["text"], plain.json()["export"]["text"]
        assert len(text.splitlines()) == len(plain_text.splitlines()), name
        assert not_comments(text) == not_comments(plain_text), name


def test_a_model_spec_named_with_a_line_break_is_refused_naming_the_field(
    api: TestClient,
) -> None:
    spec = LLAMA3_70B_SPEC
    for name in ("llama\nx", "llama\rx", "llama\u2028x", "llama\x85x", "llama\x00x"):
        refused = api.post("/v1/evaluate", json=evaluate_body({**spec, "name": name}, "megatron"))
        assert refused.status_code == 422, refused.text
        error = refused.json()["error"]
        assert error["field"] == "model.name"
        assert "one line of printable text" in error["message"]
    fine = {**spec, "name": "llama $(x) `y` 'q' \"w\" \\"}
    assert api.post("/v1/evaluate", json=evaluate_body(fine, "megatron")).status_code == 200


def cli_export(
    body: dict[str, object],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    *flags: str,
) -> tuple[int, str, str]:
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(body)))
    return run(["export", "--spec", "-", *flags], capsys)


def test_the_cli_exports_an_hf_configs_hostile_name_as_one_comment_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    _, plain, _ = cli_export(evaluate_body(hf_config("x"), "megatron"), monkeypatch, capsys)
    for name in HOSTILE:
        status, out, err = cli_export(
            evaluate_body(hf_config(name), "megatron"), monkeypatch, capsys
        )
        assert status == 0, err
        assert len(out.splitlines()) == len(plain.splitlines()), name
        assert shell_words(out, tmp_path) == shell_words(plain, tmp_path), name
    spec = evaluate_body({**LLAMA3_70B_SPEC, "name": "a\nb"}, "megatron")
    status, out, err = cli_export(spec, monkeypatch, capsys, "--json")
    assert status == 2 and out == ""
    assert json.loads(err)["error"]["field"] == "model.name"
    assert not (tmp_path / "PWNED").exists()
