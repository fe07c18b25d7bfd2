"""Test-session setup: the `backend` fixture loop tests run under.

Compiled kernels persist in rnnloop's cache (RNNLOOP_CACHE_DIR, else the user's cache dir), so
only the first run on a machine pays Numba's compile time.
"""

from __future__ import annotations

import os
import time

import pytest

# One thread per session unless a test asks for more (tests/test_threads.py): pytest-xdist already
# runs a test per core, and results compared bit for bit across sessions must not depend on splits.
os.environ.setdefault("RNNLOOP_NUM_THREADS", "1")
# Kernels compile at LLVM's -O0 here unless NUMBA_OPT says otherwise: the least compile time, which
# is most of a cold run, and the same results (rnnloop's code has no fast-math, so no level may reorder
# its float arithmetic). At -O0 Numba would cache nothing that calls another jitted function;
# rnnloop.codegen.numba_fixes lets it. rnnloop keys its cache by the level, so this code never loads in
# a user's process at -O3; CI runs the slow tests at -O3.
os.environ.setdefault("NUMBA_OPT", "0")

BACKENDS = ("interp", "numba")


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    """Each backend in turn: "interp" (the specification) and "numba" (fused kernels).

    Pair it with helpers.run_fused / helpers.run_falling_back, which also check how the loops ran.
    """
    return request.param


def pytest_addoption(parser) -> None:
    parser.addoption("--slow", action="store_true",
                     help="also run the tests marked slow: every ONNX node test under backend='numba' and "
                          "the cases that compile many kernels (CI runs them; tens of minutes with a cold "
                          "kernel cache)")
    parser.addoption("--time-budget", type=float, default=None, metavar="MINUTES",
                     help="skip, with that reason, the tests that would start after MINUTES of the run "
                          "(CI's bound on the slow tests with a cold kernel cache; every skip is listed)")


def pytest_configure(config) -> None:
    config._rnnloop_started = time.monotonic()
    import helpers
    helpers.SLOW = config.getoption("--slow")
    # rnnloop's helpers cache where RNNLOOP_CACHE_DIR points when a process loads its first kernel;
    # fixed now, before a test points it at a temporary dir of its own.
    from rnnloop.codegen import cache
    cache.install_runtime_locator()
    config.addinivalue_line(
        "markers", "numba_bug(reason): a known code generator bug; the test case is xfail(strict=True) "
                   "when it runs with backend='numba', and must pass with backend='interp'")
    config.addinivalue_line(
        "markers", "slow: compiles many kernels (seconds each with a cold cache); deselected unless --slow")


def pytest_collection_modifyitems(config, items) -> None:
    """Deselect the slow tests unless --slow; turn numba_bug marks into strict xfails of the numba
    cases only."""
    if not config.getoption("--slow"):
        slow = [item for item in items if item.get_closest_marker("slow")]
        if slow:
            config.hook.pytest_deselected(items=slow)
            items[:] = [item for item in items if not item.get_closest_marker("slow")]
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is None or callspec.params.get("backend") != "numba":
            continue
        for mark in item.iter_markers("numba_bug"):
            reason = mark.kwargs.get("reason") or (mark.args[0] if mark.args else "")
            item.add_marker(pytest.mark.xfail(strict=True, reason=f"numba bug: {reason}"))


def pytest_runtest_setup(item) -> None:
    """Under --time-budget, a test that would start after the budget is skipped, saying so."""
    budget = item.config.getoption("--time-budget")
    if budget is not None and time.monotonic() - item.config._rnnloop_started > 60 * budget:
        pytest.skip(f"the run's time budget of {budget:g} minutes is spent (--time-budget): not run")
