"""Loops of the same code share one compiled function: identical layers compile once, and each
layer's errors still name that layer."""

from __future__ import annotations

import re

import numpy as np
import pytest
from helpers import parse

import rnnloop
from rnnloop.errors import RunError

HIDDEN = 16  # (a folded bias of 4 x 16 values, small enough to be a global of the module: each layer passes its own)
INPUT = 24  # the first layer's input size: a layer's input size does not stop it sharing
RNG = np.random.default_rng(3)


def _three_lstm_layers():
    """Three stacked LSTM layers of one hidden size (the first of input size INPUT), each with its
    own weights and initial state. The parser names no node: rnnloop calls the layers LSTM_0,
    LSTM_2 and LSTM_4 (op and index)."""
    weights, lines, x = {}, [], "x"
    for k in (1, 2, 3):
        for name, shape in (("W", (1, 4 * HIDDEN, INPUT if k == 1 else HIDDEN)), ("R", (1, 4 * HIDDEN, HIDDEN)), ("B", (1, 8 * HIDDEN))):
            weights[f"{name}{k}"] = (RNG.standard_normal(shape) * 0.3).astype(np.float32)
        lines.append(f"y{k}, hn{k}, cn{k} = LSTM <hidden_size = {HIDDEN}> ({x}, W{k}, R{k}, B{k}, , h{k}, c{k})")
        lines.append(f"x{k} = Squeeze(y{k}, one)")
        x = f"x{k}"
    states = ", ".join(f"float[1, B{k}, {HIDDEN}] h{k}, float[1, B{k}, {HIDDEN}] c{k}" for k in (1, 2, 3))
    inits = ", ".join(f"float[{', '.join(map(str, w.shape))}] {n} = {{{', '.join(map(str, w.ravel().tolist()))}}}"
                      for n, w in weights.items())
    body = "\n        ".join(lines)
    return parse(f"""
    layers (float[T, B1, {INPUT}] x, {states}) => (float[T, B1, {HIDDEN}] x3)
    <int64[1] one = {{1}}, {inits}> {{
        {body}
    }}""")


@pytest.mark.slow
def test_identical_layers_compile_one_function():
    """Each layer (its loop and the ops around it) is one function of the kernel (region.outlined),
    and the three layers, of two input sizes, share it; it calls the one function of their loops."""
    session = rnnloop.load(_three_lstm_layers(), strict=True)
    (label, source), = session.kernel_sources()
    defined = re.findall(r"^def (part\d+)\(", source, re.M)
    # Error codes go in as np.int64 values: Numba would compile the function once per literal value
    # otherwise.
    called = re.findall(r"= (part\d+)\(status, np.int64\((\d+)\),", source)
    assert len(defined) == 1, source
    assert [f for f, _ in called] == defined * 3
    assert len({code for _, code in called}) == 3  # each layer with its own error codes
    loops = re.findall(r"^def (inner_loop\d+)\(", source, re.M)
    assert len(loops) == 1 and re.findall(r"= (inner_loop\d+)\(status, np.int64\(eb \+ \d+\),", source) == loops


def test_the_shared_function_agrees_with_the_interpreter():
    model = _three_lstm_layers()
    feeds = {"x": RNG.standard_normal((5, 2, INPUT)).astype(np.float32)}
    feeds |= {f"{s}{k}": RNG.standard_normal((1, 2, HIDDEN)).astype(np.float32) for s in "hc" for k in (1, 2, 3)}
    session = rnnloop.load(model, strict=True)
    got = session.run(None, feeds)
    want = rnnloop.load(model, backend="interp").run(None, feeds)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6)
    # The first layer reads the model's input and the others arrays the kernel made; every call site
    # of the shared function passes views of layout 'A' (x[:, :, :]), so that Numba compiles it once,
    # not once per layout of its arguments.
    (label, source), = session.kernel_sources()
    calls = re.findall(r"= part1\((.*)\)$", source, re.M)
    assert len(calls) == 3
    for call in calls:  # h, c and x, of rank 3
        assert re.findall(r"\w(\[:(?:, :)*\])", call) == ["[:, :, :]"] * 3, call
    layers = ", ".join(f"LSTM 'LSTM_{k}' (ai.onnx opset 17)" for k in (0, 2, 4))
    assert f"; {layers} share one function" in session.explain(), session.explain()


def test_an_error_in_a_shared_function_names_its_own_layer():
    """A state of another batch size than x's fails inside that layer's loop; the message must name
    that layer's LSTM, not the first layer whose code the function is. (One session for the three
    cases: each load of the model compiled the same kernel again, in another worker.)"""
    session = rnnloop.load(_three_lstm_layers(), strict=True)
    for layer in (1, 2, 3):
        feeds = {"x": RNG.standard_normal((5, 2, INPUT)).astype(np.float32)}
        for k in (1, 2, 3):
            batch = 3 if k == layer else 2
            feeds |= {f"{s}{k}": np.zeros((1, batch, HIDDEN), np.float32) for s in "hc"}
        with pytest.raises(RunError) as info:
            session.run(None, feeds)
        message = str(info.value)
        assert message.startswith(f"LSTM 'LSTM_{2 * (layer - 1)}'"), message


def test_the_two_directions_of_a_bidirectional_layer_share_one_function():
    W = (RNG.standard_normal((2, 4 * HIDDEN, 6)) * 0.3).astype(np.float32)
    R = (RNG.standard_normal((2, 4 * HIDDEN, HIDDEN)) * 0.3).astype(np.float32)
    B = (RNG.standard_normal((2, 8 * HIDDEN)) * 0.3).astype(np.float32)
    inits = ", ".join(f"float[{', '.join(map(str, w.shape))}] {n} = {{{', '.join(map(str, w.ravel().tolist()))}}}"
                      for n, w in (("W", W), ("R", R), ("B", B)))
    model = parse(f"""
    bi (float[T, N, 6] x) => (float[T, 2, N, {HIDDEN}] y, float[2, N, {HIDDEN}] h)
    <{inits}> {{
        y, h = LSTM <hidden_size = {HIDDEN}, direction = "bidirectional"> (x, W, R, B)
    }}""")
    session = rnnloop.load(model, strict=True)
    (_, source), = session.kernel_sources()
    assert len(re.findall(r"^def inner_loop\d+\(status, eb, rev,", source, re.M)) == 1, source
    # The directions run at once (kernel._emit_concurrent_loops), each through the one task of that
    # function, whose words carry rev after eb.
    from rnnloop.codegen import kernel
    assert len(re.findall(r"^def task\d+\(words\):", source, re.M)) == 1, source
    rev = rf"^    words(?:_\d+)?\[{kernel._FAILED + 2}\] = np\.int64\((\d)\)$"
    assert sorted(re.findall(rev, source, re.M)) == ["0", "1"], source
    x = RNG.standard_normal((7, 3, 6)).astype(np.float32)
    got = session.run(None, {"x": x})
    want = rnnloop.load(model, backend="interp").run(None, {"x": x})
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_identical_loops_holding_loops_share_their_functions_and_agree():
    """Three Scans of one body that holds a Loop: one function for the Scans and one for the inner
    Loop, each called as many times as the model has them."""
    scans = []
    for k in (1, 2, 3):
        scans.append(f"""s{k}, ys{k} = Scan <num_scan_inputs = 1, body = step{k} (float[N] acc{k}, float[N] x{k})
                => (float[N] next{k}, float[N] y{k}) {{
                doubled{k}, sum{k} = Loop <body = inner{k} (int64 i{k}, bool c{k}, float[N] v{k})
                    => (bool co{k}, float[N] vo{k}, float[N] so{k}) {{
                    co{k} = Identity(c{k})
                    vo{k} = Add(v{k}, x{k})
                    so{k} = Mul(vo{k}, half)
                }}> (three, true_, acc{k})
                next{k} = Identity(doubled{k})
                y{k} = ReduceSum <keepdims = 0> (sum{k}, zero)
            }}> (s0, xs)""")
    body = "\n        ".join(scans)
    model = parse(f"""
    nested (float[N] s0, float[T, N] xs) => (float[N] s1, float[N] s2, float[N] s3, float[T, N] ys3)
    <int64 three = {{3}}, bool true_ = {{1}}, float half = {{0.5}}, int64[1] zero = {{0}}> {{
        {body}
    }}""", check=False)
    session = rnnloop.load(model, strict=True)
    (_, source), = session.kernel_sources()
    defined = re.findall(r"^def (inner_loop\d+)\(", source, re.M)
    called = set(re.findall(r"= (inner_loop\d+)\(", source))
    assert len(defined) == 2 and called == set(defined), source
    feeds = {"s0": RNG.standard_normal(4).astype(np.float32), "xs": RNG.standard_normal((5, 4)).astype(np.float32)}
    got = session.run(None, feeds)
    want = rnnloop.load(model, backend="interp").run(None, feeds)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_canonical_text_renames_locals_only():
    """Two functions share one compiled function only when their texts differ in local names alone
    (kernel._canonical): not in the functions they call, nor in an attribute that a local shares a
    name with; comments, the docstring and the decorator do not count."""
    from rnnloop.codegen.kernel import HELPER, _canonical

    def function(name, x, size, callee, comment):
        return "\n".join([HELPER, f"def {name}(status, {x}):", f'    """{comment}"""', f"    # {comment}",
                          f"    {size} = {x}.size", f"    for i in range({size}):", f"        {x}[i] = {callee}({x}.size)",
                          f"    return {x}"])

    first = _canonical(function("part1", "in_a", "size", "inner_loop1", "LSTM 'one'"))
    assert first == _canonical(function("part2", "in_b", "size_2", "inner_loop1", "LSTM 'two'"))
    assert first != _canonical(function("part2", "in_b", "size_2", "inner_loop2", "LSTM 'two'"))
    assert ".size" in first and "inner_loop1" in first and "njit" in first


def _layer_feeds():
    feeds = {"x": RNG.standard_normal((5, 2, INPUT)).astype(np.float32)}
    return feeds | {f"{s}{k}": RNG.standard_normal((1, 2, HIDDEN)).astype(np.float32) for s in "hc" for k in (1, 2, 3)}


def test_a_layer_that_cannot_be_a_function_is_generated_inline(monkeypatch):
    """A part of a region that its kernel cannot call as a function (region.emit_part refuses it) has
    its ops generated in the kernel itself, as before parts were."""
    from rnnloop.codegen import region
    from rnnloop.codegen.emitter import NoRule

    def refuse(g, op):
        raise NoRule(f"{op.where()}: refused by the test")
    monkeypatch.setattr(region, "emit_part", refuse)
    model = _three_lstm_layers()
    session = rnnloop.load(model, strict=True)
    (_, source), = session.kernel_sources()
    assert "def part" not in source and len(re.findall(r"^def inner_loop\d+\(", source, re.M)) == 1
    feeds = _layer_feeds()
    np.testing.assert_allclose(session.run(None, feeds)[0], rnnloop.load(model, backend="interp").run(None, feeds)[0],
                               rtol=1e-5, atol=1e-6)


def test_an_op_refused_inside_a_layer_leaves_that_op_alone_to_the_interpreter(monkeypatch):
    """A rule that refuses an op of one layer's part: the part is generated inline again
    (region.generate_region), where the refusal names that op, and the partition leaves it, not the
    whole region, to the interpreter."""
    from rnnloop.codegen import kernel, rules  # noqa: F401  (rules registers Concat's rule)
    from rnnloop.codegen.emitter import NoRule

    rule = kernel.RULES["Concat"]

    def concat(g, op, ins):  # (the LSTM's lowering: the shape of Y)
        if op.origin.name == "LSTM_2":
            raise NoRule("refused by the test")
        return rule(g, op, ins)
    monkeypatch.setitem(kernel.RULES, "Concat", concat)
    model = _three_lstm_layers()
    session = rnnloop.load(model)
    interpreted = [line for line in session.explain().splitlines() if ": interpreted (" in line]
    assert len(interpreted) == 1 and interpreted[0].startswith("LSTM 'LSTM_2'"), session.explain()
    assert "refused by the test" in interpreted[0]
    feeds = _layer_feeds()
    np.testing.assert_allclose(session.run(None, feeds)[0], rnnloop.load(model, backend="interp").run(None, feeds)[0],
                               rtol=1e-5, atol=1e-6)
