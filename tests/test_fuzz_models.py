"""Random models with loops, built the way exporters build them, run alike on both backends (issue 21).

model_fuzz.build_model(seed) makes a valid ONNX model with a Loop (every trip-count mode, while
loops, zero and one iterations, a false initial condition) or a Scan (several inputs, any axes and
directions), carried values of five dtypes and ranks 0-3 from feeds, initializers and Constant
nodes, and a body of exporter-style ops (see its docstring). A child process
(fuzz_models_worker.py) loads it with backend="interp" and backend="numba" (not strict: a loop
the code generator cannot fuse falls back and passes) and runs it, so a crash or a hang fails one
example instead of the test run. The answers must agree exactly in type, dtype and shape, and in
value to the dtype's tolerance.

Hypothesis only draws seeds (derandomize=True, no shrinking: a seed's neighbours are unrelated
models), so every run, CI's included, tests the same models and reuses their kernels from
RNNLOOP_CACHE_DIR. RNNLOOP_FUZZ_EXAMPLES sets how many (default 1, and 12 more with --slow); for a
long campaign run
`python tests/fuzz_campaign.py --seeds 0:2000`. A failure names its seed: reproduce it with
`python tests/fuzz_campaign.py --seeds SEED --save DIR`, or build_model(SEED) in Python.
"""

from __future__ import annotations

import os

import onnx
import pytest
from fuzz_campaign import PASSING, Worker, run_seed
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from model_fuzz import build_model

import rnnloop

EXAMPLES = int(os.environ.get("RNNLOOP_FUZZ_EXAMPLES", "1"))  # about 4-10 s a seed when its kernels compile
TIMEOUT = 300  # seconds for one model: a cold compile of its kernels on a busy machine fits in this
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                    phases=[Phase.explicit, Phase.generate], suppress_health_check=[HealthCheck.too_slow])
seeds = st.integers(0, 2**31 - 1)


@pytest.fixture(scope="module")
def worker():
    w = Worker(TIMEOUT)
    yield w
    w.stop()


def _runs_alike(worker, seed: int) -> None:
    r = run_seed(worker, seed)
    assert r["outcome"] in PASSING, (
        f"seed {seed}: {r['outcome']}: {r['detail']}\n{r['description']}\n"
        f"reproduce: python tests/fuzz_campaign.py --seeds {seed} --save /tmp/fuzz")


@SETTINGS
@given(seeds)
def test_random_models_run_alike_on_both_backends(worker, seed):
    _runs_alike(worker, seed)


@pytest.mark.slow
@settings(SETTINGS, max_examples=12)
@given(seeds)
def test_more_random_models_run_alike_on_both_backends(worker, seed):
    """Other seeds than the test above draws (derandomize seeds each test by its name)."""
    _runs_alike(worker, seed)


@settings(SETTINGS, max_examples=200)
@given(seeds)
def test_the_generator_builds_models_the_checker_and_the_interpreter_accept(seed):
    """Many more models than the differential test runs, cheaply (no compiling): the generator is sound."""
    model, feeds, description = build_model(seed)
    onnx.checker.check_model(model, full_check=True)
    rnnloop.load(model, backend="interp", max_iterations=10_000).run(None, feeds)


def test_a_seed_always_builds_the_same_model():
    first, second = build_model(1234), build_model(1234)
    assert first[0].SerializeToString() == second[0].SerializeToString()
    assert first[2] == second[2]
