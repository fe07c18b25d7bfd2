"""ONNX backend node tests for every op rnnloop claims, run through onnx.backend.test.BackendTest.

A node test is claimed when every op in its model (subgraphs included) is an op rnnloop converts,
so the expanded tests of other ops (e.g. range_*_expanded, sequence_map_*_expanded) count too.
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import onnx
import onnx.backend.test
import pytest
from onnx.backend.test.loader import load_model_tests

import rnnloop.frontends.onnx  # noqa: F401  (registers the converters)
from rnnloop.backend import RnnloopBackend
from rnnloop.frontends.registry import CONVERTERS

with warnings.catch_warnings():  # the generators of some cases warn about their own data
    warnings.simplefilter("ignore")
    NODE_TESTS = load_model_tests(kind="node")

CLAIMED = {op for fmt, op in CONVERTERS if fmt == "onnx"}

# Every claimed test that does not run, with the reason.
EXCLUDED: dict[str, str] = {
    **{name: "training-mode Dropout draws random masks; rnnloop runs inference only and rejects it by name"
       for name in ("test_training_dropout", "test_training_dropout_default", "test_training_dropout_default_mask",
                    "test_training_dropout_mask", "test_training_dropout_zero_ratio",
                    "test_training_dropout_zero_ratio_mask")},
}

# Tests onnx's runner cannot compare: it recurses into a sequence output's elements as if each were a
# list of outputs, and len() of a 0-d element fails. Each is checked by test_compared_here below.
COMPARED_HERE = {"test_loop16_seq_none"}
EXCLUDED.update({name: "onnx runner bug with 0-d sequence elements; see COMPARED_HERE" for name in COMPARED_HERE})

# Loop-related tests: every one of them must be claimed and pass.
LOOP_PATTERN = re.compile(r"^test_(loop|scan|if|sequence_|optional_|split_to_sequence|concat_from_sequence"
                          r"|identity_sequence|identity_opt|range_.*_expanded)")
LOOP_TESTS = {t.name for t in NODE_TESTS if LOOP_PATTERN.match(t.name)}


def _ops(graph: onnx.GraphProto) -> set[str]:
    ops = set()
    for node in graph.node:
        ops.add(node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}")
        for attr in node.attribute:
            for g in [attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs):
                ops |= _ops(g)
    return ops


SELECTED = sorted(t.name for t in NODE_TESTS if t.model is not None and _ops(t.model.graph) <= CLAIMED)

backend_test = onnx.backend.test.BackendTest(RnnloopBackend, __name__)
backend_test.include("^(" + "|".join(SELECTED) + ")_cpu$")
for _name in EXCLUDED:
    backend_test.exclude(f"^{_name}_cpu$")
globals().update(backend_test.test_cases)


def test_every_loop_related_node_test_is_claimed_and_not_excluded():
    assert len(LOOP_TESTS) >= 41
    assert sorted(LOOP_TESTS - set(SELECTED)) == []
    assert sorted(LOOP_TESTS & set(EXCLUDED) - COMPARED_HERE) == []


def test_exclusions_are_claimed_tests():
    assert sorted(set(EXCLUDED) - set(SELECTED)) == []


@pytest.mark.parametrize("name", sorted(COMPARED_HERE))
def test_compared_here(name):
    case = next(t for t in NODE_TESTS if t.name == name)
    session = RnnloopBackend.prepare(case.model)
    for inputs, expected in case.data_sets:
        outputs = session.run(inputs)
        assert len(outputs) == len(expected)
        for out, ref in zip(outputs, expected):
            if isinstance(ref, list):
                assert isinstance(out, list) and len(out) == len(ref)
            else:
                out, ref = [out], [ref]
            for a, e in zip(out, ref):
                assert a.dtype == e.dtype and a.shape == e.shape
                np.testing.assert_allclose(a, e, rtol=case.rtol, atol=case.atol)
