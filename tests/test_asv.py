"""The asv suite as the README runs it: asv finds nothing wrong with any benchmark, builds rnnloop's wheel
alone, and the README's commands record and publish results."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_asv_check_finds_no_problem_in_any_benchmark():
    pytest.importorskip("asv", reason="asv comes with the test and bench extras: pip install -e '.[test]'")
    done = subprocess.run([sys.executable, "-m", "asv", "check", "--python=same"], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0 and "No problems found" in done.stdout, done.stdout + done.stderr


def test_asv_builds_rnnloops_wheel_without_the_wheels_of_its_dependencies():
    """asv installs the one wheel in its build cache and stops at two ("Found multiple wheels"): its
    default `pip wheel` puts every dependency's wheel there too."""
    commands = json.loads((ROOT / "asv.conf.json").read_text())["build_command"]
    wheels = [c for c in commands if " wheel " in c]
    assert wheels and all("--no-deps" in c and "-w {build_cache_dir}" in c for c in wheels), commands


def test_the_readmes_asv_commands_record_results_under_a_commit_and_publish_them():
    text = (ROOT / "README.md").read_text()
    benchmarks = text[text.index("## Benchmarks\n"):]
    runs = [line for line in benchmarks.splitlines() if line.startswith("asv run --python=same")]
    assert runs and all("--set-commit-hash $(git rev-parse HEAD)" in line for line in runs)
    assert "\nasv check --python=same" in benchmarks and "\nasv publish" in benchmarks
