"""Sequences built in a loop.

A loop whose body only appends to a carried sequence (SequenceInsert without a position) is fused:
the kernel keeps the elements stacked in one growing array and returns them as a RowSequence. The
interpreter appends in place too, so each append is O(1) amortised under either backend. Elements
that change shape send the loop back to the interpreter at run time, with a warning.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import load_falling_back, load_fused, parse

import rnnloop
from rnnloop.interp import registry
from rnnloop.interp.sequence_ops import RowSequence, run_concatfromsequence
from rnnloop.models import sequence_insert_loop


def test_sequence_insert_in_a_loop_appends_in_place(monkeypatch, backend):
    copies = []
    copying_insert = registry.RUNNERS["SequenceInsert"]

    def counting_insert(*args, **kwargs):
        copies.append(1)
        return copying_insert(*args, **kwargs)

    # The copying implementation is only for sequences someone else still holds.
    monkeypatch.setitem(registry.RUNNERS, "SequenceInsert", counting_insert)
    model, feeds = sequence_insert_loop(3000)
    y, = load_fused(model, backend).run(None, feeds)
    np.testing.assert_array_equal(y, np.tile(np.arange(4, dtype=np.float32), 3000))
    assert copies == []


GROW_TEXT = """
grow (seq(float[D]) s0, int64 M, float[D] x) => (seq(float[D]) s) {
    s = Loop(M, , s0) <body = step (int64 i, bool c, seq(float[D]) s_in) => (bool c2, seq(float[D]) s_out) {
        c2 = Identity(c)
        s_out = SequenceInsert(s_in, x)
    }>
}"""
GROW = parse(GROW_TEXT.replace("[D]", "[2]"))


@pytest.mark.parametrize("start", [0, 1, 20])
def test_a_sequence_fed_by_the_caller_is_extended_and_never_modified(backend, start):
    s0 = [np.full(2, k, np.float32) for k in range(start)]
    s, = load_fused(GROW, backend).run(None, {"s0": s0, "M": 3, "x": np.ones(2, np.float32)})
    assert len(s0) == start and all((v == k).all() for k, v in enumerate(s0))
    assert [v.tolist() for v in s] == [v.tolist() for v in s0] + [[1.0, 1.0]] * 3


def test_elements_of_another_shape_run_in_the_interpreter(backend):
    s0 = [np.zeros(2, np.float32), np.zeros(3, np.float32)]  # legal, but not one stacked array
    feeds = {"s0": s0, "M": 2, "x": np.ones(2, np.float32)}
    session = load_fused(parse(GROW_TEXT.replace("[D]", "[?]")), backend)
    if backend == "numba":
        with pytest.warns(rnnloop.FallbackWarning, match="inputs of other dtypes or ranks"):
            s, = session.run(None, feeds)
    else:
        s, = session.run(None, feeds)
    assert [v.shape for v in s] == [(2,), (3,), (2,), (2,)]


def test_elements_that_change_shape_during_the_loop_run_in_the_interpreter(backend):
    # The i-th element is x[:i+1]: the kernel stops at the second append and the loop runs again.
    model = parse("""
    prefixes (int64 M, float[N] x) => (seq(float[?]) s) {
        empty = SequenceEmpty <dtype = 1> ()
        s = Loop(M, , empty) <body = step (int64 i, bool c, seq(float[?]) s_in) => (bool c2, seq(float[?]) s_out) {
            c2 = Identity(c)
            zero = Constant <value = int64[1] {0}> ()
            one = Constant <value = int64[1] {1}> ()
            end = Add(i, one)
            part = Slice(x, zero, end)
            s_out = SequenceInsert(s_in, part)
        }>
    }""")
    feeds = {"M": np.array(3), "x": np.arange(5, dtype=np.float32)}
    session = load_fused(model, backend)
    if backend == "numba":
        with pytest.warns(rnnloop.FallbackWarning, match="elements change shape at iteration 1"):
            s, = session.run(None, feeds)
    else:
        s, = session.run(None, feeds)
    assert [v.tolist() for v in s] == [[0.0], [0.0, 1.0], [0.0, 1.0, 2.0]]


def test_a_sequence_read_in_the_body_is_interpreted(backend):
    model = parse("""
    count (int64 M, float[2] x) => (seq(float[2]) s, int64[M] n) {
        empty = SequenceEmpty <dtype = 1> ()
        s, n = Loop(M, , empty) <body = step (int64 i, bool c, seq(float[2]) s_in) => (bool c2, seq(float[2]) s_out, int64 k) {
            c2 = Identity(c)
            k = SequenceLength(s_in)
            s_out = SequenceInsert(s_in, x)
        }>
    }""")
    session = load_falling_back(model, backend, "compiled only when the body appends to it")
    s, n = session.run(None, {"M": np.array(3), "x": np.ones(2, np.float32)})
    assert len(s) == 3 and n.tolist() == [0, 1, 2]


@pytest.mark.parametrize("new_axis", [0, 1])
def test_joining_a_row_sequence_equals_joining_its_rows(new_axis):
    rows = np.arange(24, dtype=np.float32).reshape(4, 2, 3)
    join = np.stack if new_axis else np.concatenate
    for axis in range(-2 - new_axis, 2 + new_axis):
        got = run_concatfromsequence(RowSequence(rows), axis=axis, new_axis=new_axis)
        np.testing.assert_array_equal(got, join(list(rows), axis=axis))
        assert not np.shares_memory(got, rows)
