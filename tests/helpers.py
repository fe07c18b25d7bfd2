"""Small models in ONNX text syntax, and oracles to compare rnnloop against."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

import rnnloop

IR_VERSION = 8  # onnxruntime reads at most 13; onnx 1.23 writes 14 by default


def parse(text: str, opset: int = 17, check: bool = True) -> onnx.ModelProto:
    """A model from ONNX text syntax: the graph only, with the header filled in."""
    model = onnx.parser.parse_model(f'<ir_version: {IR_VERSION}, opset_import: ["" : {opset}]>\n{text}')
    if check:
        onnx.checker.check_model(model)
    return model


def run(model: onnx.ModelProto, feeds: dict, **options) -> list:
    return rnnloop.load(model, **options).run(None, feeds)


def run_onnxruntime(model: onnx.ModelProto, feeds: dict) -> list:
    """onnxruntime's answer, or skip the test when it is not installed."""
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def assert_same(actual: list, expected: list, rtol: float = 1e-5, atol: float = 1e-6) -> None:
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        if isinstance(e, list):
            assert isinstance(a, list) and len(a) == len(e)
            assert_same(a, e, rtol, atol)
            continue
        e = np.asarray(e)
        assert a.dtype == e.dtype, (a.dtype, e.dtype)
        assert a.shape == e.shape, (a.shape, e.shape)
        np.testing.assert_allclose(a, e, rtol=rtol, atol=atol)
