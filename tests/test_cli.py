"""The command line: run, inspect, codegen, bench, cache and demo, and what it says when something is wrong."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys

import numpy as np
import onnx
import pytest

import rnnloop
from rnnloop.cli import _parser, main
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


def test_a_malformed_model_spec_says_how_to_write_one(capsys):
    assert main(["codegen", "lstm_loop:1x2x3x4x5"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("rnnloop: error:") and "like lstm_loop:1x64x128x200" in err and err.count("\n") == 1


def det_model() -> onnx.ModelProto:
    """A model onnxruntime runs and rnnloop does not: Det has no rnnloop converter."""
    return onnx.parser.parse_model('<ir_version: 8, opset_import: ["" : 17]>\n'
                                   "g (float[3,3] x) => (float y) { y = Det(x) }")


# (command line, with {d} the test's folder and m.onnx in it; what the one line on stderr says)
PROBLEMS = [
    (["run", "{d}/m.onnx", "--input", "x0={d}/missing.npy"], "--input x0: cannot read '{d}/missing.npy': No such file"),
    (["run", "{d}/m.onnx", "--input", "x0={d}/not_an_npy"], "--input x0: '{d}/not_an_npy' is not an .npy file"),
    (["run", "{d}/m.onnx", "--input", "x0={d}/arrays.npz"], "--input x0: '{d}/arrays.npz' is an .npz archive"),
    (["run", "{d}/m.onnx", "--input", "x0"], "--input takes NAME=FILE.npy, got 'x0'"),
    (["run", "small_loop:3", "--output-dir", "{d}/m.onnx"], "File exists: '{d}/m.onnx'"),
    (["run", "{d}/missing.onnx"], "no such model file: '{d}/missing.onnx'"),
    (["bench", "{d}/missing.onnx"], "no such model file: '{d}/missing.onnx'"),
    (["bench", "{d}/garbage.onnx"], "the model is not a valid ONNX file"),
    (["inspect", "{d}/missing.xml"], "no such model file: '{d}/missing.xml'"),
    (["inspect", "missing.xml"], "no such model file: 'missing.xml'"),
    (["codegen", "{d}"], "'{d}' is a directory, not a model file"),
    (["inspect", "no_such_model"], "'no_such_model' is not a built-in model; the built-in models are lstm_loop"),
    (["bench", "{d}/m.onnx", "--dim", "T"], "--dim takes NAME=INT, got 'T'"),
]


@pytest.mark.parametrize("argv, message", PROBLEMS, ids=[" ".join(a) for a, _ in PROBLEMS])
def test_a_problem_with_the_files_or_options_is_one_line_on_stderr_and_exit_status_1(argv, message, tmp_path,
                                                                                      capsys):
    onnx.save(small_loop(3)[0], str(tmp_path / "m.onnx"))
    (tmp_path / "not_an_npy").write_text("x0 = [1, 2, 3]\n")
    np.savez(tmp_path / "arrays.npz", x0=np.zeros(3))
    (tmp_path / "garbage.onnx").write_bytes(b"\x08\x07garbage")
    assert main([a.format(d=tmp_path) for a in argv]) == 1
    captured = capsys.readouterr()
    assert captured.err.startswith("rnnloop: error: " + message.format(d=tmp_path)), captured.err
    assert captured.err.count("\n") == 1 and "Traceback" not in captured.err and captured.out == ""


def test_bench_exits_with_1_when_rnnloop_cannot_run_the_model(tmp_path, capsys):
    onnx.save(det_model(), str(tmp_path / "det.onnx"))
    assert main(["bench", str(tmp_path / "det.onnx"), "--repeat", "1", "--no-openvino", "--no-interp"]) == 1
    captured = capsys.readouterr()
    assert "\nonnxruntime " in captured.out  # the table still shows what ran
    assert captured.err == ("rnnloop: error: rnnloop numba could not run the model: UnsupportedModelError: "
                            "Det 'Det_0' (ai.onnx opset 17): 'Det' is not supported\n")


def test_run_takes_a_built_in_model_with_its_own_feeds_or_given_ones(tmp_path, capsys):
    model, feeds = small_loop(3)
    expected = rnnloop.load(model, backend="interp").run(None, feeds)[0]
    assert main(["run", "small_loop:3", "--output-dir", str(tmp_path)]) == 0
    np.testing.assert_allclose(np.load(tmp_path / "x.npy"), expected, rtol=1e-6)
    np.save(tmp_path / "zeros.npy", np.zeros_like(feeds["x0"]))
    assert main(["run", "small_loop", "--steps", "3", "--input", f"x0={tmp_path / 'zeros.npy'}",
                 "--output-dir", str(tmp_path)]) == 0
    zeros = rnnloop.load(model, backend="interp").run(None, {**feeds, "x0": np.zeros_like(feeds["x0"])})[0]
    np.testing.assert_allclose(np.load(tmp_path / "x.npy"), zeros, rtol=1e-6)
    assert "x: (1, 16) float32" in capsys.readouterr().out


def test_python_dash_m_rnnloop_runs_the_command_and_version_prints_the_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0 and capsys.readouterr().out == f"rnnloop {rnnloop.__version__}\n"
    done = subprocess.run([sys.executable, "-m", "rnnloop", "--version"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and done.stdout == f"rnnloop {rnnloop.__version__}\n", done.stderr
    done = subprocess.run([sys.executable, "-m", "rnnloop", "inspect", "no_such_model"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 1 and done.stderr.startswith("rnnloop: error: 'no_such_model' is not a built-in")


SIZES = ["model", "--batch", "--input-size", "--hidden", "--steps"]
OPTIONS = {  # each command's own options: none that means nothing for it
    "run": [*SIZES, "--seed", "--input", "--output-dir", "--max-iterations"],
    "inspect": SIZES,  # (the seed of a built-in model's weights changes nothing it prints)
    "codegen": [*SIZES, "--seed"],  # (small weights are constants in the source)
    "bench": [*SIZES, "--seed", "--repeat", "--warmup", "--json", "--compile", "--interp", "--no-interp",
              "--no-openvino", "--dim", "--input-value", "--threads"],
    "cache info": [],
    "cache clear": ["--older-than"],
    "demo": ["--steps", "--repeat"],
}


def commands(parser: argparse.ArgumentParser, prefix: str = "") -> dict[str, argparse.ArgumentParser]:
    """Every command's parser by its name ("cache clear" for a command of a command)."""
    found = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found[prefix + name] = sub
                found.update(commands(sub, prefix + name + " "))
    return found


def test_each_command_has_only_its_own_options_each_with_help_text():
    parsers = commands(_parser())
    assert set(OPTIONS) <= set(parsers) and set(parsers) - set(OPTIONS) == {"cache"}
    for name, options in OPTIONS.items():
        actions = [a for a in parsers[name]._actions
                   if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))]
        assert [a.option_strings[0] if a.option_strings else a.dest for a in actions] == options, name
        for action in actions:
            assert action.help and action.help != argparse.SUPPRESS, (name, action.option_strings)
    steps = {name: next(a.help for a in parsers[name]._actions if "--steps" in a.option_strings)
             for name in ("inspect", "bench")}
    assert "model file" not in steps["inspect"] and "for a model file" in steps["bench"]
