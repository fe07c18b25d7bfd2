"""A Session under load: many threads at once, and many runs in a row without memory growth."""

from __future__ import annotations

import os
import sys
import threading

import numpy as np
import pytest

import rnnloop
from rnnloop.models import lstm_loop

SIZES = {"batch": 2, "input_size": 8, "hidden": 16, "steps": 12}


def feeds_for(seed: int) -> dict:
    rng = np.random.default_rng(seed)
    _, feeds = lstm_loop(**SIZES)
    return {k: rng.standard_normal(v.shape).astype(v.dtype) for k, v in feeds.items()}


@pytest.mark.parametrize("backend", ["numba", "interp"])
def test_one_session_in_eight_threads_gives_the_sequential_results(backend):
    session = rnnloop.load(lstm_loop(**SIZES)[0], backend=backend, strict=backend == "numba")
    feeds = [feeds_for(seed) for seed in range(8)]
    expected = [session.run(None, f) for f in feeds]
    failures: list[str] = []
    start = threading.Barrier(8)

    def worker(k: int) -> None:
        start.wait()
        for call in range(100):
            f = feeds[(k + call) % 8]
            got = session.run(None, f)
            want = expected[(k + call) % 8]
            if not all(np.array_equal(a, b) for a, b in zip(got, want)):
                failures.append(f"thread {k}, call {call}")
                return

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


def _resident_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/statm")
def test_ten_thousand_runs_of_an_lstm_keep_memory_flat():
    from numba.core.runtime import _nrt_python, rtsys
    session = rnnloop.load(lstm_loop(**SIZES)[0], strict=True)
    feeds = feeds_for(0)
    for _ in range(500):  # warm: the kernel compiled, allocator pools filled
        session.run(None, feeds)
    _nrt_python.memsys_enable_stats()
    try:
        before, allocations = _resident_bytes(), rtsys.get_allocation_stats()
        for _ in range(10_000):
            session.run(None, feeds)
        after, stats = _resident_bytes(), rtsys.get_allocation_stats()
    finally:
        _nrt_python.memsys_disable_stats()
    grown = (after - before) / 2**20
    # Every array a kernel allocated was freed (the NRT's own books), and the process did not grow.
    live = (stats.alloc - stats.free) - (allocations.alloc - allocations.free)
    assert live == 0, f"{live} kernel allocations leaked over 10,000 runs"
    assert grown < 8, f"resident memory grew by {grown:.1f} MiB over 10,000 runs"


@pytest.mark.parametrize("backend", ["numba", "interp"])
def test_strided_read_only_and_non_finite_feeds_give_the_contiguous_results(backend):
    session = rnnloop.load(lstm_loop(**SIZES)[0], backend=backend, strict=backend == "numba")
    plain = feeds_for(3)
    plain["X"][2, 0, :3] = [np.nan, np.inf, -np.inf]
    odd = {"X": np.repeat(plain["X"], 2, axis=0)[::2],         # every other step of a bigger array
           "h0": np.asfortranarray(plain["h0"]), "c0": plain["c0"].T.copy().T}
    for array in odd.values():
        array.setflags(write=False)
    assert not odd["X"].flags.c_contiguous and not odd["h0"].flags.c_contiguous
    kept = {k: v.copy() for k, v in odd.items()}
    expected = session.run(None, plain)
    assert np.isnan(expected[2][2:]).any()  # the NaN went through the steps after it
    for got, want in zip(session.run(None, odd), expected):
        np.testing.assert_array_equal(got, want)
    for k, v in odd.items():
        np.testing.assert_array_equal(v, kept[k])
