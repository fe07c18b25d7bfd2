"""Small models in ONNX text syntax, and oracles to compare rnnloop against."""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import pytest

import rnnloop
from rnnloop.builder import Builder
from rnnloop.ir import Graph, Slice, Stack, TensorType

IR_VERSION = 8  # onnxruntime reads at most 13; onnx 1.23 writes 14 by default
SLOW = False  # whether this run takes the tests marked slow (--slow): conftest.py sets it before collecting


def parse(text: str, opset: int = 17, check: bool = True) -> onnx.ModelProto:
    """A model from ONNX text syntax: the graph only, with the header filled in."""
    model = onnx.parser.parse_model(f'<ir_version: {IR_VERSION}, opset_import: ["" : {opset}]>\n{text}')
    if check:
        onnx.checker.check_model(model)
    return model


def run(model: onnx.ModelProto, feeds: dict, **options) -> list:
    return rnnloop.load(model, **options).run(None, feeds)


def load_fused(model: onnx.ModelProto, backend: str, **options) -> rnnloop.Session:
    """A session on `backend`; under numba every loop must fuse (strict=True raises otherwise)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", rnnloop.FallbackWarning)
        session = rnnloop.load(model, backend=backend, strict=backend == "numba", **options)
    assert session.plans, "the model has no loop"
    if backend == "numba":
        assert all(p.fused is not None for p in session.plans), session.explain()
    return session


def run_fused(model: onnx.ModelProto, feeds: dict, backend: str, **options) -> list:
    """Run on `backend`; under numba every loop must run as a fused kernel."""
    return load_fused(model, backend, **options).run(None, feeds)


def load_falling_back(model: onnx.ModelProto, backend: str, match: str, **options) -> rnnloop.Session:
    """A session on `backend`; under numba some loop must fall back to the interpreter, with a
    FallbackWarning matching `match` (the loop and the reason); under interp no warning at all."""
    if backend == "numba":
        with pytest.warns(rnnloop.FallbackWarning, match=match):
            session = rnnloop.load(model, backend=backend, **options)
        assert any(p.fused is None for p in session.plans), session.explain()
        return session
    with warnings.catch_warnings():
        warnings.simplefilter("error", rnnloop.FallbackWarning)
        return rnnloop.load(model, backend=backend, **options)


def run_falling_back(model: onnx.ModelProto, feeds: dict, backend: str, match: str, **options) -> list:
    """Run on `backend`, expecting (under numba) a loop interpreted for the reason `match` gives."""
    return load_falling_back(model, backend, match, **options).run(None, feeds)


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


def cumulative_sum(slice_: Slice, stack: Stack, outputs: list[str] | None = None) -> Graph:
    """An IR loop whose body declares no types: carry += x_part, the carry stacked after each step;
    x is float32 [6, 4]. `outputs` names the final carry and the stacked output."""
    b = Builder("main")
    x = b.input("x", TensorType(np.dtype(np.float32), (6, 4)))
    zero = b.constant(np.zeros((1, 4) if slice_.keep_axis else (4,), np.float32))
    body = b.sub("body")
    acc, part = body.input("acc"), body.input("part")
    total = body.op1("Add", acc, part)
    body.output(total)
    body.output(total)
    for name in b.loop(body.graph, carried=[zero], sliced=[(x, slice_)], stacked=[stack], outputs=outputs):
        b.output(name)
    return b.graph


def thin(params, every: int, single: bool = False) -> list:
    """`params` of a parametrize with all but every `every`-th case marked slow: the default run
    samples the grid (each case compiles its own kernels: seconds each with a cold cache), --slow
    runs all of it. `single`: each value is one argument, not a tuple of them."""
    thinned = []
    for k, p in enumerate(params):
        if not isinstance(p, type(pytest.param(None))):
            p = pytest.param(p) if single else pytest.param(*p)
        thinned.append(p if k % every == 0 else pytest.param(*p.values, id=p.id, marks=[*p.marks, pytest.mark.slow]))
    return thinned
