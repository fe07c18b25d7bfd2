"""The command line: run, inspect, codegen, bench and demo."""

from __future__ import annotations

import re

import numpy as np
import onnx
import pytest

import rnnloop
from rnnloop.cli import main
from rnnloop.models import MODELS, lstm_loop, small_loop


def test_run_reads_npy_inputs_and_writes_npy_outputs(tmp_path, capsys):
    model, feeds = small_loop(5)
    onnx.save(model, str(tmp_path / "m.onnx"))
    args = [str(tmp_path / "m.onnx"), "--output-dir", str(tmp_path / "out")]
    for name, value in feeds.items():
        np.save(tmp_path / f"{name}.npy", value)
        args += ["--input", f"{name}={tmp_path / f'{name}.npy'}"]
    assert main(["run", *args]) == 0
    x = feeds["x0"]
    for _ in range(5):
        x = np.tanh(x * np.float32(0.5) + np.float32(0.5))
    np.testing.assert_allclose(np.load(tmp_path / "out" / "x.npy"), x, rtol=1e-6)
    assert "x: (1, 16) float32" in capsys.readouterr().out


def test_inspect_prints_inputs_outputs_and_each_loop_with_its_mode(tmp_path, capsys):
    model, _ = lstm_loop(1, 4, 8, 3)
    onnx.save(model, str(tmp_path / "lstm.onnx"))
    assert main(["inspect", str(tmp_path / "lstm.onnx")]) == 0
    out = capsys.readouterr().out
    assert "X: tensor(float) ['T', 'B', 'I']" in out
    assert "runs until trip count 'steps', initial condition 'go', body condition 'cond_out'" in out
    assert "carried    h0 -> h" in out and "stacked    Y stacked on axis 0" in out
    assert "invariant  X" in out


def test_errors_are_reported_without_a_traceback(tmp_path, capsys):
    (tmp_path / "bad.onnx").write_bytes(b"\x08\x07garbage")
    assert main(["inspect", str(tmp_path / "bad.onnx")]) == 1
    assert capsys.readouterr().err.startswith("rnnloop: error:")


def test_inspect_takes_a_built_in_model_and_prints_its_plan(capsys):
    assert main(["inspect", "gru_scan:1x3x8x2"]) == 0
    out = capsys.readouterr().out
    assert "loop Scan 'Scan_0' (ai.onnx opset 17): runs until the length of its sliced inputs" in out
    assert re.search(r"plan:\n(  .*\n)*  Scan 'Scan_0' \(ai.onnx opset 17\): (fused|interpreted \()", out), out


def test_demo_compares_fused_interpreted_and_onnxruntime(capsys):
    assert main(["demo", "--steps", "5", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    for label in ("rnnloop numba", "rnnloop interp", "onnxruntime", "onnxruntime LSTM op"):
        assert f"\n{label} " in out
    assert "us/step" in out and "max |diff|" in out and "OUTPUTS DISAGREE" not in out


@pytest.mark.parametrize("spec", ["small_loop:3", "gru_scan:1x2x4x3"])
def test_codegen_prints_each_fused_kernel_or_why_none_is_fused(spec, capsys):
    assert main(["codegen", spec]) == 0
    out = capsys.readouterr().out
    name, _, sizes = spec.partition(":")
    session = rnnloop.load(MODELS[name](*map(int, sizes.split("x")))[0])
    sources = session.kernel_sources()
    if sources:
        for label, source in sources:
            assert f"# ===== {label} =====\n{source.rstrip()}" in out
    else:
        assert out.startswith("no loop is fused:")
        assert session.explain().splitlines()[0].strip() in out


def test_codegen_reads_a_model_file(tmp_path, capsys):
    onnx.save(small_loop(3)[0], str(tmp_path / "m.onnx"))
    assert main(["codegen", str(tmp_path / "m.onnx")]) == 0
    out = capsys.readouterr().out
    assert out.startswith(("# =====", "no loop is fused:"))


def test_a_malformed_model_spec_says_how_to_write_one():
    with pytest.raises(SystemExit, match=r"like lstm_loop:1x64x128x200"):
        main(["codegen", "lstm_loop:1x2x3x4x5"])
