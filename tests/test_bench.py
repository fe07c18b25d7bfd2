"""The built-in models and `rnnloop bench`: equivalent peers, random feeds, agreement, and the report's shape.

No timing assertions: times only have to be positive numbers where an engine ran.
"""

from __future__ import annotations

import json
import re

import numpy as np
import onnx
import pytest
from helpers import assert_same, run_onnxruntime

import rnnloop
from rnnloop import bench
from rnnloop.cli import main
from rnnloop.models import MODELS, RNN_SIZES, native_peer, resolve, size_names

# Hidden 128 as in the demo and `rnnloop bench lstm_loop`: the kernels hold the gate widths as constants,
# so these tests, the demo's and a default bench share one compiled kernel per form.
SIZES = {"batch": 2, "input_size": 3, "hidden": 128, "steps": 4, "seed": 7}
SPEC = "2x3x128x4"


def run_rnnloop(model: onnx.ModelProto, feeds: dict, backend: str) -> list:
    """Run with rnnloop; under numba every loop must fuse (strict=True raises otherwise)."""
    return rnnloop.load(model, backend=backend, strict=backend == "numba").run(None, feeds)


@pytest.mark.parametrize("cell", ["lstm", "gru"])
@pytest.mark.parametrize("form", ["loop", "scan"])
def test_loop_and_scan_cells_compute_what_onnxruntimes_native_op_computes(cell, form):
    native = run_onnxruntime(*MODELS[f"{cell}_native"](**SIZES))
    model, feeds = MODELS[f"{cell}_{form}"](**SIZES)
    assert_same(run_onnxruntime(model, feeds), native, rtol=1e-5, atol=1e-5)
    assert_same(run_rnnloop(model, feeds, "interp"), native, rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_the_scan_step_computes_what_the_loop_model_computes():
    from rnnloop.models import lstm_step
    step, init, xs = lstm_step(**SIZES)
    (h, c), y = rnnloop.scan(step, init, xs)
    assert_same([h, c, y], run_rnnloop(*MODELS["lstm_loop"](**SIZES), "interp"), rtol=1e-5, atol=1e-5)


# Each fused form costs a kernel compile on a cold cache: both cells and both forms, in two models.
@pytest.mark.slow
@pytest.mark.parametrize("name", ["lstm_loop", "gru_scan"])
def test_fused_cells_compute_what_onnxruntimes_native_op_computes(name):
    model, feeds = MODELS[name](**SIZES)
    native = run_onnxruntime(*MODELS[native_peer(name)](**SIZES))
    assert_same(run_rnnloop(model, feeds, "numba"), native, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_native_op_models_run_the_same_under_rnnloop(cell):
    model, feeds = MODELS[f"{cell}_native"](**SIZES)
    session = rnnloop.load(model, backend="interp")
    assert_same(session.run(None, feeds), run_onnxruntime(model, feeds), rtol=1e-5, atol=1e-5)


def test_every_form_of_a_cell_gets_the_same_feeds_for_the_same_arguments():
    for cell in ("lstm", "gru"):
        feeds = [MODELS[f"{cell}_{form}"](**SIZES)[1] for form in ("loop", "scan", "native")]
        for other in feeds[1:]:
            assert other.keys() == feeds[0].keys()
            assert all(np.array_equal(other[k], feeds[0][k]) for k in other)
    assert native_peer("gru_scan") == "gru_native" and native_peer("lstm_native") is None
    assert native_peer("small_loop") is None


def test_models_declare_an_ir_version_onnxruntime_reads():
    for name, builder in MODELS.items():
        model = builder(**resolve(name, batch=1, input_size=2, hidden=3, steps=2)[1])[0]
        assert model.ir_version <= 9, name


def test_a_model_spec_gives_sizes_in_the_builders_order():
    assert resolve("lstm_loop:16x128x256x200") == (
        "lstm_loop", {"batch": 16, "input_size": 128, "hidden": 256, "steps": 200, "seed": 0})
    assert resolve("gru_scan:4", hidden=8)[1] == {"batch": 4, "input_size": 64, "hidden": 8, "steps": 200, "seed": 0}
    assert resolve("small_loop:500", batch=3) == ("small_loop", {"steps": 500})  # sizes it lacks are ignored
    assert size_names("sequence_insert_loop") == ["steps"]
    assert RNN_SIZES[0] == (1, 64, 128, 200)
    for bad in ("lstm_loop:1x2x3x4x5", "lstm_loop:1xa", "no_such_model"):
        with pytest.raises(ValueError, match="lstm_loop"):
            resolve(bad)


def test_random_feeds_follow_the_input_types_dims_and_values():
    model, _ = MODELS["lstm_scan"](**SIZES)
    feeds = bench.random_feeds(model, {"T": 6, "B": 2})
    assert feeds["X"].shape == (6, 2, 1) and feeds["X"].dtype == np.float32
    assert feeds["h0"].shape == (2, 1)
    small, _ = MODELS["small_loop"](3)
    feeds = bench.random_feeds(small)
    assert feeds["M"] == bench.DEFAULT_TRIP_COUNT and feeds["M"].dtype == np.int64
    assert bench.random_feeds(small, values={"M": 7})["M"] == 7
    assert bench.infer_steps(small, {"M": np.int64(7)}) == 7
    assert bench.infer_steps(model, {"X": np.zeros((6, 2, 3), np.float32)}) == 6


def test_outputs_are_compared_by_shape_and_tolerance():
    assert bench.max_difference([np.ones(3)], [np.ones(3) * 1.5]) == 0.5
    assert bench.max_difference([[np.ones(2)]], [[np.zeros(2)]]) == 1.0  # a sequence output
    assert bench.max_difference([np.ones(3)], [np.ones(4)]) == float("inf")
    assert bench.outputs_agree([np.float32([1, 2])], [np.float32([1, 2 + 1e-6])])
    assert not bench.outputs_agree([np.float32([1, 2])], [np.float32([1, 2.1])])
    assert not bench.outputs_agree([np.ones(3)], [np.ones(4)])
    assert bench.outputs_agree([[np.int64(1)], np.nan], [[np.int64(1)], np.nan])


def test_a_failing_engine_is_reported_not_raised():
    def broken():
        raise RuntimeError("cannot read\nthe model")
    results = bench.measure([bench.Engine("ok", lambda: lambda: [np.zeros(2)]), bench.Engine("broken", broken)], 2)
    assert results[0].seconds > 0 and results[0].runs == 2 and results[0].difference == 0
    assert results[1].seconds is None and results[1].error == "RuntimeError: cannot read the model"


def test_differences_are_against_the_reference_engine_and_a_slow_optional_engine_is_timed_once(monkeypatch):
    monkeypatch.setattr(bench, "CHEAP_SECONDS", -1.0)
    engines = [bench.Engine("first", lambda: lambda: [np.zeros(2)]),
               bench.Engine("reference", lambda: lambda: [np.ones(2)]),
               bench.Engine("slow", lambda: lambda: [np.ones(2)], optional=True)]
    first, reference, slow = bench.measure(engines, repeat=3, warmup=0, reference="reference")
    assert first.difference == 1.0 and first.agrees is False
    assert reference.difference == 0.0 and reference.runs == 3
    assert slow.runs == 1 and slow.seconds > 0 and "timed once" in slow.note


def table_rows(out: str) -> dict[str, list[str]]:
    """The table's rows: engine label -> the remaining columns."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("engine")) + 1
    rows = {}
    for line in lines[start:]:
        if line.startswith(("plan", "cold", "warm", "note", "  ")):
            break
        rows[line[:24].strip()] = line[24:].split()
    return rows


def test_bench_prints_one_table_with_the_native_op_peer_and_ratios_to_onnxruntime(capsys):
    assert main(["bench", f"lstm_loop:{SPEC}", "--seed", "7", "--repeat", "1", "--interp", "--no-openvino"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("model: lstm_loop:2x3x128x4 (batch x input_size x hidden x steps), seed 7\n")
    rows = table_rows(out)
    assert list(rows) == ["rnnloop numba", "rnnloop interp", "rnnloop numba LSTM op", "onnxruntime",
                          "onnxruntime LSTM op"]
    for label, cols in rows.items():
        first, ms, us_step, vs_ort, vs_op, diff = map(float, cols)
        assert first > 0 and ms > 0 and us_step > 0 and vs_ort > 0 and vs_op > 0, label
        assert us_step * 4 / 1e3 == pytest.approx(ms, rel=1e-3, abs=1e-3), label  # per step = per run / steps
        assert diff < 1e-5, label
    assert float(rows["onnxruntime"][3]) == 1.0 and float(rows["onnxruntime LSTM op"][4]) == 1.0
    assert re.search(r"plan \(rnnloop numba\):\n(  .*\n)*  Loop 'Loop_5' \(ai.onnx opset 17\): fused", out), out
    assert "cold compile" not in out


def test_bench_json_parses_and_holds_the_same_figures(capsys):
    assert main(["bench", "gru_native:1x3x8x4", "--repeat", "1", "--warmup", "0", "--json", "--no-openvino"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["steps"] == 4 and report["repeat"] == 1 and report["reference"] == "onnxruntime"
    engines = {e["label"]: e for e in report["engines"]}
    assert engines["rnnloop numba"]["agrees"] and engines["rnnloop numba"]["median_s"] > 0  # ONNX's GRU op, fused
    ort = engines["onnxruntime"]
    assert ort["median_s"] > 0 and ort["runs"] == 1 and ort["vs_onnxruntime"] == 1.0 and ort["agrees"]
    assert ort["per_step_s"] == pytest.approx(ort["median_s"] / 4)
    assert report["startup"] is None


def test_bench_threads_gives_every_engine_and_blas_that_many_threads(monkeypatch, capsys):
    asked = []

    def recording(runner):
        def run(model, feeds, *args):
            asked.append((runner.__name__, args[-1]))
            return runner(model, feeds, *args)
        return run
    for name in ("rnnloop_runner", "onnxruntime_runner"):
        monkeypatch.setattr(bench, name, recording(getattr(bench, name)))
    limits = []
    limited = bench.limited_threads
    monkeypatch.setattr(bench, "limited_threads", lambda threads: limits.append(threads) or limited(threads))
    assert main(["bench", "gru_native:1x3x8x4", "--repeat", "1", "--warmup", "0", "--json", "--no-openvino",
                 "--no-interp", "--threads", "2"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["threads"] == 2 and all(e["median_s"] > 0 for e in report["engines"])
    assert sorted(asked) == [("onnxruntime_runner", 2), ("rnnloop_runner", 2)]
    assert limits == [2, 2]  # the command, then the timed rounds: BLAS on the same threads
    assert main(["bench", "gru_native:1x3x8x4", "--repeat", "1", "--warmup", "0", "--no-openvino", "--no-interp",
                 "--threads", "0"]) == 0
    assert "each engine on its default threads; median of 1 samples" in capsys.readouterr().out
    assert ("rnnloop_runner", 0) in asked and limits[-1] == 0
    with pytest.raises(SystemExit):
        main(["bench", "gru_native", "--threads", "-1"])
    assert "a number of threads (0 or more), got '-1'" in capsys.readouterr().err


def test_bench_exits_with_1_when_outputs_disagree(capsys):
    report = bench.Report("t", [bench.Result("onnxruntime", 1.0, 1.0, 1, 0.0, True),
                                bench.Result("rnnloop numba", 1.0, 1.0, 1, 0.5, False)], 1, reference="onnxruntime")
    from rnnloop.cli import _print_report
    assert _print_report(report, as_json=False) == 1
    captured = capsys.readouterr()
    assert "OUTPUTS DISAGREE" in captured.out and "rnnloop numba disagree" in captured.err


def test_bench_compile_times_cold_compile_and_warm_load_in_new_processes(tmp_path, capsys):
    model, _ = MODELS["small_loop"](3)
    onnx.save(model, str(tmp_path / "small.onnx"))
    assert main(["bench", str(tmp_path / "small.onnx"), "--repeat", "1", "--input-value", "M=5",
                 "--no-openvino", "--no-interp", "--compile"]) == 0
    out = capsys.readouterr().out
    rows = table_rows(out)
    assert list(rows) == ["rnnloop numba", "onnxruntime"]
    assert float(rows["onnxruntime"][2]) > 0  # us/step: the steps come from the trip count fed
    cold = next(line for line in out.splitlines() if line.startswith("cold compile:"))
    warm = next(line for line in out.splitlines() if line.startswith("warm load:"))
    assert float(cold.split()[2]) > 0 and float(warm.split()[2]) > 0
    assert "import rnnloop" in warm


def test_an_unknown_model_lists_the_built_in_ones(capsys):
    assert main(["bench", "no_such_model"]) == 1
    assert "the built-in models are lstm_loop" in capsys.readouterr().err
