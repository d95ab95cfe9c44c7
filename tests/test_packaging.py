"""The package's extras: the CLI and the Python client run without the server's and the
studies' packages, `layoutopt serve` and `layoutopt study` say what to install, and the
README's two commands stay as they are."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SERVER_ONLY = ("fastapi", "uvicorn", "starlette", "pydantic_settings", "prometheus_client")
STUDIES_ONLY = ("yaml", "pyarrow", "matplotlib", "distributed", "dask", "tqdm")
# Runs the code with the server's packages made unimportable, as after `pip install layoutopt`.
WITHOUT_SERVER = f"""
import sys
class Absent:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {SERVER_ONLY + STUDIES_ONLY!r} + ("fastapi_offline",):
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
sys.meta_path.insert(0, Absent())
"""


def pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def names(requirements: list[str]) -> set[str]:
    return {r.split(">")[0].split("<")[0].split("=")[0].split("[")[0].strip() for r in requirements}


def test_base_install_leaves_out_the_server_and_the_test_tools() -> None:
    project = pyproject()["project"]
    base, extras = names(project["dependencies"]), project["optional-dependencies"]
    server = names(extras["server"])
    assert {"fastapi", "uvicorn", "pydantic-settings", "prometheus-client"} <= server
    studies = names(extras["studies"])
    assert {"pyyaml", "pyarrow", "matplotlib", "distributed", "tqdm"} <= studies
    assert not base & (server | studies | names(extras["test"]) - {"layoutopt"})
    # the suite runs the real server and the studies (`make test` installs both)
    (own,) = [r for r in extras["test"] if r.startswith("layoutopt[")]
    assert set(own.removeprefix("layoutopt[").rstrip("]").split(",")) >= {"server", "studies"}


def run_without_server(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_SERVER + code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_cli_and_client_work_without_the_server_packages() -> None:
    done = run_without_server(
        "import api.client\n"
        "from api.cli import main\n"
        "sys.exit(main(['evaluate', '--model', 'llama3-8b', '--gpus', '8', '--json']))"
    )
    assert done.returncode == 0, done.stderr
    assert '"mfu"' in done.stdout


def test_serve_without_the_server_packages_says_what_to_install() -> None:
    done = run_without_server("from api.cli import main\nsys.exit(main(['serve']))")
    assert done.returncode == 1
    assert "pip install 'layoutopt[server]'" in done.stderr and "Traceback" not in done.stderr


def test_study_without_the_studies_packages_says_what_to_install(tmp_path: Path) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text('{"base": {"model": "llama3-8b", "cluster": {"gpus": 8}}}')
    out = tmp_path / "r.csv"
    done = run_without_server(
        f"from api.cli import main\nsys.exit(main(['study', {str(spec)!r}, '--out', {str(out)!r}]))"
    )
    assert done.returncode == 1, done.stderr
    assert "pip install 'layoutopt[studies]'" in done.stderr and "Traceback" not in done.stderr
    assert not out.exists()


def test_calibration_is_an_extra_the_test_extra_includes() -> None:
    project = pyproject()["project"]
    extras = project["optional-dependencies"]
    assert "scipy" in names(extras["calibration"])
    assert "scipy" not in names(project["dependencies"])  # the base install stays light
    (self_extra,) = [spec for spec in extras["test"] if spec.startswith("layoutopt[")]
    assert "calibration" in self_extra.removeprefix("layoutopt[").rstrip("]").split(",")


def test_calibrate_without_scipy_says_what_to_install(tmp_path: Path) -> None:
    runs = tmp_path / "runs.jsonl"
    runs.write_text(
        '{"request": {"model": "llama3-8b", "cluster": {"gpus": 8}}, "measured": {"mfu": 0.4}}\n'
    )
    code = (
        "class NoScipy:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'scipy':\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, NoScipy())\n"
        "from api.cli import main\n"
        f"sys.exit(main(['calibrate', {str(runs)!r}]))"
    )
    done = run_without_server(code)
    assert done.returncode == 1
    assert "pip install 'layoutopt[calibration]'" in done.stderr and "Traceback" not in done.stderr
