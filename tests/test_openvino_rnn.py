"""OpenVINO's recurrent layers (cells and sequences) against OpenVINO's CPU plugin, and an ONNX LSTM
converted by OpenVINO against the ONNX original in rnnloop."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import load_fused, thin

import rnnloop

ov = pytest.importorskip("openvino", reason="the openvino package is not installed")
ops = pytest.importorskip("openvino.opset13")
CONFIG = {"INFERENCE_PRECISION_HINT": "f32"}  # OpenVINO defaults to bf16 on this CPU
HIDDEN, INPUT = 6, 4


def _weights(rng, *shape):
    return ops.constant((rng.standard_normal(shape) * 0.5).astype(np.float32))


def _check(model, tmp_path, feeds, backend="interp"):
    """`backend` "numba": the model's loops must fuse; "interp": a model without loops (a cell)."""
    path = str(tmp_path / "m.xml")
    ov.save_model(model, path, compress_to_fp16=False)
    want = [np.asarray(v) for v in ov.Core().compile_model(path, "CPU", CONFIG)(feeds).values()]
    session = load_fused(path, backend) if backend == "numba" else rnnloop.load(path, backend=backend)
    got = session.run(None, feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


CELLS = [("LSTM", {}), ("LSTM", {"clip": 0.7}), ("GRU", {}), ("GRU", {"linear_before_reset": True}),
         ("RNN", {}), ("RNN", {"activations": ["relu"]})]


@pytest.mark.parametrize("kind, extra", CELLS, ids=[f"{k}-{'-'.join(e) or 'default'}" for k, e in CELLS])
def test_cell_layers_match_openvino(tmp_path, kind, extra):
    rng = np.random.default_rng(0)
    gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[kind]
    x = ops.parameter([3, INPUT], np.float32, name="x")
    h = ops.parameter([3, HIDDEN], np.float32, name="h")
    w, r = _weights(rng, gates * HIDDEN, INPUT), _weights(rng, gates * HIDDEN, HIDDEN)
    bias = _weights(rng, (gates + int(extra.get("linear_before_reset", False))) * HIDDEN)
    feeds = {"x": rng.standard_normal((3, INPUT)).astype(np.float32),
             "h": rng.standard_normal((3, HIDDEN)).astype(np.float32)}
    if kind == "LSTM":
        c = ops.parameter([3, HIDDEN], np.float32, name="c")
        feeds["c"] = rng.standard_normal((3, HIDDEN)).astype(np.float32)
        cell = ops.lstm_cell(x, h, c, w, r, bias, HIDDEN, **extra)
        params = [x, h, c]
    elif kind == "GRU":
        cell = ops.gru_cell(x, h, w, r, bias, HIDDEN, **extra)
        params = [x, h]
    else:
        cell = ops.rnn_cell(x, h, w, r, bias, HIDDEN, extra.get("activations", ["tanh"]), [], [])
        params = [x, h]
    _check(ov.Model(list(cell.outputs()), params, "cell"), tmp_path, feeds)


SEQUENCES = [("RNN", "reverse", {}), ("LSTM", "forward", {}), ("LSTM", "reverse", {}), ("LSTM", "bidirectional", {}),
             ("GRU", "forward", {"linear_before_reset": True}), ("GRU", "bidirectional", {})]


@pytest.mark.parametrize("kind, direction, extra", thin(SEQUENCES, 100),
                         ids=[f"{k}-{d}{'-lbr' if e else ''}" for k, d, e in SEQUENCES])
def test_sequence_layers_match_openvino(tmp_path, kind, direction, extra):
    rng = np.random.default_rng(1)
    gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[kind]
    dirs = 2 if direction == "bidirectional" else 1
    batch, steps = 2, 5
    x = ops.parameter([batch, steps, INPUT], np.float32, name="x")
    h = ops.parameter([batch, dirs, HIDDEN], np.float32, name="h")
    lengths = ops.constant(np.full(batch, steps, np.int32))
    w, r = _weights(rng, dirs, gates * HIDDEN, INPUT), _weights(rng, dirs, gates * HIDDEN, HIDDEN)
    bias = _weights(rng, dirs, (gates + int(extra.get("linear_before_reset", False))) * HIDDEN)
    feeds = {"x": rng.standard_normal((batch, steps, INPUT)).astype(np.float32),
             "h": rng.standard_normal((batch, dirs, HIDDEN)).astype(np.float32)}
    params = [x, h]
    if kind == "LSTM":
        c = ops.parameter([batch, dirs, HIDDEN], np.float32, name="c")
        feeds["c"] = rng.standard_normal((batch, dirs, HIDDEN)).astype(np.float32)
        params.append(c)
        seq = ops.lstm_sequence(x, h, c, lengths, w, r, bias, HIDDEN, direction, **extra)
    elif kind == "GRU":
        seq = ops.gru_sequence(x, h, lengths, w, r, bias, HIDDEN, direction, **extra)
    else:
        seq = ops.rnn_sequence(x, h, lengths, w, r, bias, HIDDEN, direction, **extra)
    _check(ov.Model(list(seq.outputs()), params, "seq"), tmp_path, feeds, backend="numba")


@pytest.mark.slow
def test_sequence_with_per_row_lengths(tmp_path):
    rng = np.random.default_rng(2)
    x = ops.parameter([3, 5, INPUT], np.float32, name="x")
    h = ops.parameter([3, 1, HIDDEN], np.float32, name="h")
    lengths = ops.parameter([3], np.int32, name="lengths")
    seq = ops.gru_sequence(x, h, lengths, _weights(rng, 1, 3 * HIDDEN, INPUT), _weights(rng, 1, 3 * HIDDEN, HIDDEN),
                           _weights(rng, 1, 3 * HIDDEN), HIDDEN, "forward")
    feeds = {"x": rng.standard_normal((3, 5, INPUT)).astype(np.float32),
             "h": rng.standard_normal((3, 1, HIDDEN)).astype(np.float32), "lengths": np.array([5, 2, 4], np.int32)}
    _check(ov.Model(list(seq.outputs()), [x, h, lengths], "seq"), tmp_path, feeds, backend="numba")


@pytest.mark.slow
def test_onnx_lstm_converted_by_openvino_matches_the_onnx_original(tmp_path):
    from rnnloop.models import lstm_native
    model, _ = lstm_native(2, 8, 16, 7)[:2]
    converted = ov.convert_model(_onnx_file(model, tmp_path))
    kinds = {op.get_type_name() for op in converted.get_ops()}
    assert "LSTMSequence" in kinds
    path = str(tmp_path / "converted.xml")
    ov.save_model(converted, path, compress_to_fp16=False)
    rng = np.random.default_rng(3)
    feeds = {"X": rng.standard_normal((7, 2, 8)).astype(np.float32),
             "h0": rng.standard_normal((2, 16)).astype(np.float32),
             "c0": rng.standard_normal((2, 16)).astype(np.float32)}
    original = rnnloop.load(model, backend="interp").run(None, feeds)
    got = load_fused(path, "numba").run(None, feeds)
    by_name = dict(zip([o.name for o in rnnloop.load(path, backend="interp").get_outputs()], got))
    for name, want in zip(["h", "c", "Y"], original):
        np.testing.assert_allclose(by_name[name], want, rtol=1e-5, atol=1e-6)


def _onnx_file(model, tmp_path) -> str:
    import onnx
    path = str(tmp_path / "model.onnx")
    onnx.save(model, path)
    return path
