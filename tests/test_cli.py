"""The command line: run, inspect and demo."""

from __future__ import annotations

import numpy as np
import onnx

from rnnloop.cli import main
from rnnloop.models import lstm_loop, small_loop


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


def test_demo_compares_with_onnxruntime(capsys):
    assert main(["demo", "--steps", "5", "--repeat", "2"]) == 0
    out = capsys.readouterr().out
    assert "rnnloop interpreter" in out and "us/step" in out
