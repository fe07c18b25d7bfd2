"""The loop IR: built with the builder, checked by the verifier, printed in a stable text form, interpreted."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import cumulative_sum

from rnnloop.builder import Builder
from rnnloop.errors import ModelError, RunError
from rnnloop.interp.graph import Options, run_graph
from rnnloop.ir import Slice, Stack, TensorType, format_graph
from rnnloop.verify import verify

F32 = np.dtype(np.float32)


def run_ir(graph, *args):
    verify(graph)
    return run_graph(graph, list(args), Options())[0]


X = np.arange(24, dtype=np.float32).reshape(6, 4)


@pytest.mark.parametrize("slice_, parts", [
    (Slice(axis=0), X),
    (Slice(axis=0, reverse=True), X[::-1]),
    (Slice(axis=0, start=1, end=-1), X[1:5]),
    (Slice(axis=0, start=0, end=6, stride=2), X[0::2]),
    (Slice(axis=0, stride=2, reverse=True), X[0::2][::-1]),
    (Slice(axis=-2, start=-3), X[3:]),
])
def test_sliced_input_yields_parts_by_start_end_stride_and_direction(slice_, parts):
    final, stacked = run_ir(cumulative_sum(slice_, Stack()), X)
    np.testing.assert_array_equal(final, parts.sum(axis=0))
    np.testing.assert_array_equal(stacked, np.cumsum(parts, axis=0))


def test_sliced_input_with_parts_of_two_keeps_the_axis():
    final, stacked = run_ir(cumulative_sum(Slice(axis=0, part=2, stride=2, keep_axis=True), Stack(concat=True)), X)
    pairs = X.reshape(3, 2, 4)
    np.testing.assert_array_equal(final, pairs.sum(axis=0))
    np.testing.assert_array_equal(stacked, np.cumsum(pairs, axis=0).reshape(6, 4))


@pytest.mark.parametrize("stack, expected", [
    (Stack(axis=0), np.cumsum(X, axis=0)),
    (Stack(axis=1), np.cumsum(X, axis=0).T),
    (Stack(axis=-1), np.cumsum(X, axis=0).T),
    (Stack(axis=0, reverse=True), np.cumsum(X, axis=0)[::-1]),
    (Stack(axis=0, concat=True), np.cumsum(X, axis=0).reshape(-1)),
    (Stack(axis=0, length=8), np.concatenate([np.cumsum(X, axis=0), np.zeros((2, 4), np.float32)])),
])
def test_stacked_output_joins_iterations_by_axis_direction_mode_and_length(stack, expected):
    _, stacked = run_ir(cumulative_sum(Slice(axis=0), stack), X)
    np.testing.assert_array_equal(stacked, expected)


def test_padded_length_shorter_than_the_iterations_is_an_error():
    with pytest.raises(RunError, match="more than its padded length 3"):
        run_ir(cumulative_sum(Slice(axis=0), Stack(length=3)), X)


def test_verifier_reports_every_problem_at_once():
    b = Builder("main")
    x = b.input("x", TensorType(F32, (2,)))
    b.op1("Add", x, "nowhere")
    b.op1("Frobnicate", x)
    body = b.sub("body")
    body.input("only")
    body.output("only")
    b.loop(body.graph, carried=[x, x])  # the body takes 1 input; the loop passes 2
    b.output("missing")
    with pytest.raises(ModelError) as info:
        verify(b.graph)
    message = str(info.value)
    assert "4 problem(s)" in message
    for part in ("'nowhere' is not defined", "'Frobnicate' is not an op", "body takes 1 inputs",
                 "output 'missing' is never defined"):
        assert part in message


def test_text_form_is_stable_and_shows_ports():
    text = format_graph(cumulative_sum(Slice(axis=0, reverse=True), Stack(axis=1, concat=True)))
    assert text == format_graph(cumulative_sum(Slice(axis=0, reverse=True), Stack(axis=1, concat=True)))
    assert "Loop[carried=1, invariant=0, sliced=[slice(axis=0, reverse=True)], " \
           "stacked=[stack(axis=1, concat=True)], body=-]" in text
    assert "graph main(%x: float32[6,4])" in text
