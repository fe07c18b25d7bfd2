"""Sequences built in a loop: SequenceInsert appends in place, so each append is O(1) amortised.

A loop that carries a sequence is interpreted under either backend (kernels take tensors only).
"""

from __future__ import annotations

import numpy as np
from helpers import load_falling_back, parse

from rnnloop.interp import registry
from rnnloop.models import sequence_insert_loop

# Under numba, the warning that says why a loop carrying a sequence is interpreted.
CARRIES_A_SEQUENCE = r"Loop '.*' \(.*\): interpreted \(the type of '.*' is not a tensor of known dtype and rank \(seq\("


def test_sequence_insert_in_a_loop_extends_the_carried_list_in_place(monkeypatch, backend):
    copies = []
    copying_insert = registry.RUNNERS["SequenceInsert"]

    def counting_insert(*args, **kwargs):
        copies.append(1)
        return copying_insert(*args, **kwargs)

    # The copying implementation is only for sequences someone else still holds.
    monkeypatch.setitem(registry.RUNNERS, "SequenceInsert", counting_insert)
    model, feeds = sequence_insert_loop(3000)
    y, = load_falling_back(model, backend, CARRIES_A_SEQUENCE).run(None, feeds)
    np.testing.assert_array_equal(y, np.tile(np.arange(4, dtype=np.float32), 3000))
    assert copies == []


def test_a_sequence_fed_by_the_caller_is_never_modified(backend):
    model = parse("""
    grow (seq(float[2]) s0, int64 M, float[2] x) => (seq(float[2]) s) {
        s = Loop(M, , s0) <body = step (int64 i, bool c, seq(float[2]) s_in) => (bool c2, seq(float[2]) s_out) {
            c2 = Identity(c)
            s_out = SequenceInsert(s_in, x)
        }>
    }""")
    s0 = [np.zeros(2, np.float32)]
    session = load_falling_back(model, backend, CARRIES_A_SEQUENCE)
    s, = session.run(None, {"s0": s0, "M": 3, "x": np.ones(2, np.float32)})
    assert len(s) == 4 and len(s0) == 1
