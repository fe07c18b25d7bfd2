"""Models exported from torch nn.LSTM / nn.GRU / nn.RNN run in rnnloop as torch computes them.

torch is the oracle here: an independent implementation of the same cells. The models are exported
with torch's TorchScript-based exporter (`dynamo=False`), which writes ONNX's LSTM/GRU/RNN ops, one
node per layer, with the Expand/Concat/Reshape glue torch puts around them.
"""

from __future__ import annotations

import io
import warnings

import numpy as np
import onnx
import pytest
from helpers import load_fused

torch = pytest.importorskip("torch", reason="torch is not installed: pip install torch to run these tests")

CASES = [  # (module, layers, bidirectional, batch_first, extra kwargs)
    ("LSTM", 2, True, True, {}),
    ("LSTM", 1, False, False, {}),
    ("GRU", 2, True, False, {}),
    ("RNN", 2, False, True, {"nonlinearity": "relu"}),
    ("RNN", 1, True, False, {"nonlinearity": "tanh"}),
]


def _export(module, example: tuple, n_states: int, names: list[str]) -> onnx.ModelProto:
    f = io.BytesIO()
    inputs = ["x", "h0", "c0"][:1 + n_states]
    dynamic = {"x": {0: "d0", 1: "d1"}} | {n: {1: "batch"} for n in inputs[1:]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, example, f, dynamo=False, opset_version=17, input_names=inputs,
                          output_names=names, dynamic_axes=dynamic)
    return onnx.load_from_string(f.getvalue())


@pytest.mark.parametrize("kind, layers, bidirectional, batch_first, extra", CASES,
                         ids=[f"{c[0]}-{c[1]}layers-{'bi' if c[2] else 'uni'}-{'bf' if c[3] else 'sf'}"
                              for c in CASES])
def test_torch_exported_model_matches_torch(kind, layers, bidirectional, batch_first, extra, backend):
    torch.manual_seed(0)
    module = getattr(torch.nn, kind)(6, 10, num_layers=layers, bidirectional=bidirectional,
                                     batch_first=batch_first, **extra).eval()
    d = 2 if bidirectional else 1
    batch, steps = 3, 5
    x = torch.randn((batch, steps, 6) if batch_first else (steps, batch, 6))
    h0 = torch.randn(layers * d, batch, 10)
    states = (h0, torch.randn(layers * d, batch, 10)) if kind == "LSTM" else (h0,)
    example = (x, states if kind == "LSTM" else h0)
    names = ["y", "h", "c"] if kind == "LSTM" else ["y", "h"]
    model = _export(module, example, len(states), names)
    session = load_fused(model, backend)
    for b, t in [(batch, steps), (2, 7)]:  # the exported sizes, and others through the dynamic axes
        x = torch.randn((b, t, 6) if batch_first else (t, b, 6))
        states = tuple(torch.randn(layers * d, b, 10) for _ in states)
        with torch.no_grad():
            y, final = module(x, states if kind == "LSTM" else states[0])
        expected = [y, *(final if kind == "LSTM" else (final,))]
        feeds = {"x": x.numpy()} | {n: s.numpy() for n, s in zip(["h0", "c0"], states)}
        got = session.run(None, feeds)
        for name, g, e in zip(names, got, expected):
            np.testing.assert_allclose(g, e.numpy(), rtol=1e-4, atol=1e-5, err_msg=f"{kind} output {name}")


@pytest.mark.parametrize("kind, layers", [("LSTM", 3), ("GRU", 2)])
def test_torch_exported_bidirectional_encoder_is_one_region_matching_torch(kind, layers):
    # An encoder as published models call it, without initial states: the exporter makes zero states
    # by ConstantOfShape and joins the layers by Transpose/Reshape; all of it is one compiled kernel.
    import rnnloop
    from rnnloop.ir import Region
    torch.manual_seed(1)
    module = getattr(torch.nn, kind)(8, 16, num_layers=layers, bidirectional=True).eval()
    names = ["y", "h", "c"] if kind == "LSTM" else ["y", "h"]
    model = _export(module, (torch.randn(5, 12, 8),), 0, names)
    with warnings.catch_warnings():
        warnings.simplefilter("error", rnnloop.FallbackWarning)
        session = rnnloop.load(model, strict=True)
    assert [type(op) for op in session.program.ops] == [Region], session.explain()
    for batch, steps in ((12, 5), (1, 7)):
        x = torch.randn(steps, batch, 8)
        with torch.no_grad():
            y, final = module(x)
        expected = [y, *(final if kind == "LSTM" else (final,))]
        for name, g, e in zip(names, session.run(None, {"x": x.numpy()}), expected):
            np.testing.assert_allclose(g, e.numpy(), rtol=1e-4, atol=1e-5, err_msg=f"{kind} output {name}")
