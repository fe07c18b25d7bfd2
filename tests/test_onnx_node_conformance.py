"""ONNX backend node tests for every op rnnloop claims, run through onnx.backend.test.BackendTest.

A node test is claimed when every op in its model (subgraphs included) is an op rnnloop converts,
so the expanded tests of other ops (e.g. range_*_expanded, sequence_map_*_expanded) count too. Only
claimed tests are collected: the thousands of node tests of other ops are not skips that mean nothing.

Every claimed test runs under both backends: backend="interp" (InterpOnnxBackendNodeModelTest) in
every run, backend="numba" (OnnxBackendNodeModelTest: each model compiled into regions) for the
smoke set SMOKE (every loop-related test) in every run, and for every claimed test with --slow (each
compiles its own kernel: about half an hour cold on 2 cores; CI runs it). The default run compiles
every op elsewhere too: the elementwise ops one by one in test_codegen_scalar.py, the others in the
tests of their modules and of the built-in models.

onnx makes its node tests' data when their modules are imported, running its reference
implementation. For the pools that takes 12 of the 16 seconds every test process spends on it (3-d
pools, in Python), so the cases of SLOW_TO_MAKE are made, and run under both backends, only with
--slow; tests/test_nn_ops.py checks the pools against onnxruntime, over a grid of their attributes,
in every run.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import warnings

import numpy as np
import onnx
import onnx.backend.test
import pytest
import onnx.backend.test.case.node as node_cases
import onnx.backend.test.runner
from onnx.backend.test.case.utils import import_recursive

import helpers
import rnnloop
import rnnloop.frontends.onnx  # registers the converters
from rnnloop.backend import RnnloopBackend
from rnnloop.frontends.registry import CONVERTERS

# onnx's case modules whose data takes seconds to make (see the docstring): made only with --slow.
SLOW_TO_MAKE = ("averagepool", "lppool", "maxpool")


def _make_node_tests(slow: bool) -> tuple[list, set[str]]:
    """onnx's node test cases (as onnx.backend.test.loader.load_model_tests(kind="node") makes
    them), less those of SLOW_TO_MAKE unless `slow`, and the names of the cases of SLOW_TO_MAKE."""
    slow_names: set[str] = set()
    with warnings.catch_warnings():  # the generators of some cases warn about their own data
        warnings.simplefilter("ignore")
        for info in pkgutil.iter_modules(node_cases.__path__):
            if info.name in SLOW_TO_MAKE and not slow or info.name == "ai_onnx_ml" and not onnx.ONNX_ML:
                continue  # (onnx's loader leaves out ai.onnx.ml's cases where onnx is built without it)
            before = len(node_cases._NodeTestCases)
            module = importlib.import_module(f"{node_cases.__name__}.{info.name}")
            if info.ispkg:
                import_recursive(module)
            if info.name in SLOW_TO_MAKE:
                slow_names |= {t.name for t in node_cases._NodeTestCases[before:]}
    return list(node_cases._NodeTestCases), slow_names


NODE_TESTS, MADE_SLOWLY = _make_node_tests(helpers.SLOW)

CLAIMED = {op for fmt, op in CONVERTERS if fmt == "onnx"}

# Every claimed test that does not run, with the reason.
EXCLUDED: dict[str, str] = {
    **{name: "training-mode Dropout draws random masks; rnnloop runs inference only and rejects it by name"
       for name in ("test_training_dropout", "test_training_dropout_default", "test_training_dropout_default_mask",
                    "test_training_dropout_mask", "test_training_dropout_zero_ratio",
                    "test_training_dropout_zero_ratio_mask")},
    **{name: "training-mode BatchNormalization (batch statistics, running-statistics outputs); rnnloop runs "
             "inference only and rejects training_mode=1 by name"
       for name in ("test_batchnorm_example_training_mode", "test_batchnorm_epsilon_training_mode")},
    **{name: "the expected imaginary part of the Nyquist bin is complex64 rounding noise (1.9e-7 where the exact "
             "value is 0) above the test's atol of 1e-7; rnnloop's result is exact to float32 (onnxruntime's is off "
             "by 1.3e-5); tests/test_signal_ops.py compares the same data at float32 tolerance"
       for name in ("test_dft_inverse", "test_dft_inverse_opset19")},
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

# Claimed tests whose model (subgraphs included) holds a Loop or Scan: the ones a backend changes.
WITH_LOOPS = sorted(t.name for t in NODE_TESTS if t.name in SELECTED and _ops(t.model.graph) & {"Loop", "Scan"})

# Loop and Scan node tests whose every loop fuses into a kernel under numba (more may join).
FUSED = {"test_loop11", "test_scan9_sum", "test_scan9_multi_state", "test_scan9_scalar"}


def _with_backend(backend: str) -> type[RnnloopBackend]:
    """RnnloopBackend that loads every model with `backend`."""
    class Backend(RnnloopBackend):
        @classmethod
        def prepare(cls, model, device="CPU", **kwargs):
            return super().prepare(model, device, backend=backend, **kwargs)
    Backend.__name__ = f"RnnloopBackend_{backend}"
    return Backend


# (The first node test of every other op was in the smoke set too: 74 kernels more, about five
# minutes of a cold default run on 2 cores, against issue 24's six for the whole run.)
SMOKE = set(LOOP_TESTS)


def _node_tests(backend: str, names: list[str], slow: set[str] = frozenset()) -> type:
    """onnx's OnnxBackendNodeModelTest running `names` (less EXCLUDED) with `backend`; only those are
    collected, and the ones in `slow` are marked slow."""
    loader = onnx.backend.test.runner.load_model_tests  # BackendTest takes its node tests from it
    onnx.backend.test.runner.load_model_tests = lambda kind=None, **kw: NODE_TESTS if kind == "node" else loader(
        kind=kind, **kw)
    try:
        test = onnx.backend.test.BackendTest(_with_backend(backend), __name__)
    finally:
        onnx.backend.test.runner.load_model_tests = loader
    case = test.test_cases["OnnxBackendNodeModelTest"]
    keep = set(names) - set(EXCLUDED)
    for attr in [a for a in vars(case) if a.startswith("test_")]:
        name = attr.removesuffix("_cpu")
        if name not in keep:
            delattr(case, attr)
        elif name in slow:
            setattr(case, attr, pytest.mark.slow(getattr(case, attr)))
    return case


OnnxBackendNodeModelTest = _node_tests("numba", SELECTED, slow=set(SELECTED) - SMOKE | MADE_SLOWLY)
InterpOnnxBackendNodeModelTest = type("InterpOnnxBackendNodeModelTest",
                                      (_node_tests("interp", SELECTED, slow=MADE_SLOWLY),), {})


def test_every_loop_related_node_test_is_claimed_and_not_excluded():
    assert len(LOOP_TESTS) >= 41
    assert sorted(LOOP_TESTS - set(SELECTED)) == []
    assert sorted(LOOP_TESTS & set(EXCLUDED) - COMPARED_HERE) == []


def test_exclusions_are_claimed_tests():
    assert sorted(set(EXCLUDED) - set(SELECTED)) == []


def test_every_claimed_node_test_runs_under_both_backends():
    named = {n for n in SELECTED if "loop" in n or "scan" in n}
    assert len(WITH_LOOPS) >= 30 and named <= set(WITH_LOOPS)
    for case in (OnnxBackendNodeModelTest, InterpOnnxBackendNodeModelTest):
        ran = {n[:-len("_cpu")] for n in dir(case) if n.startswith("test_") and n.endswith("_cpu")}
        assert ran == set(SELECTED) - set(EXCLUDED), case.__name__


def test_the_numba_smoke_set_holds_every_loop_test():
    assert LOOP_TESTS - set(EXCLUDED) <= SMOKE


@pytest.mark.parametrize("name", sorted(FUSED))
def test_loop_node_test_fuses_every_loop_under_numba(name):
    case = next(t for t in NODE_TESTS if t.name == name)
    session = rnnloop.load(case.model, backend="numba", strict=True)
    assert session.plans and all(p.fused is not None for p in session.plans), session.explain()


@pytest.mark.parametrize("name", sorted(COMPARED_HERE))
def test_compared_here(name, backend):
    case = next(t for t in NODE_TESTS if t.name == name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", rnnloop.FallbackWarning)  # a sequence carried: interpreted
        session = RnnloopBackend.prepare(case.model, backend=backend)
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
