"""rnnloop.codegen.blas: products of every layout BLAS can read (and some it cannot) against NumPy."""

import itertools
import json
import os
import subprocess
import sys
import threading
import time

import numba
import numpy as np
import pytest

from rnnloop.codegen import blas, simd


def _strided(fn, dtype, panels=False):
    """fn compiled once for matrices of any strides (Numba layout 'A'), so that every layout below
    runs the same machine code: each layout would otherwise be a compile of its own (minutes on a
    fresh checkout, where these functions have no cache yet). With `panels`, fn takes b's panels
    (simd.pack) after b, and whether to read them backwards, the threads it may use and the address
    of the workers' block (rnnloop.codegen.pool) after out."""
    matrix = numba.from_dtype(np.dtype(dtype))[:, :]
    if panels:
        signature = numba.void(matrix, matrix, numba.from_dtype(np.dtype(dtype))[:, :, ::1], matrix, numba.boolean,
                               numba.int64, numba.int64)
        compiled = numba.njit(signature)(lambda a, b, p, out, backwards, threads, block:
                                         fn(a, b, p, out, backwards, threads, block))
        return lambda a, b, p, out, backwards, threads=1, block=0: compiled(a, b, p, out, backwards, threads, block)
    return numba.njit(numba.void(matrix, matrix, matrix))(lambda a, b, out: fn(a, b, out))


def _layouts(x):
    """x as C-order, F-order, a strided window, a column-reversed view and a transposed copy."""
    yield x
    yield np.asfortranarray(x)
    big = np.zeros((2 * x.shape[0] + 1, 3 * x.shape[1] + 2), x.dtype)
    big[1::2, 2::3] = x
    yield big[1::2, 2::3]
    yield np.ascontiguousarray(x[:, ::-1])[:, ::-1]
    yield np.ascontiguousarray(x.T).T


def _outs(m, n, dtype):
    yield np.full((m, n), np.nan, dtype)
    yield np.full((n, m), np.nan, dtype).T
    yield np.full((m, 2 * n), np.nan, dtype)[:, ::2]
    yield np.full((m, n), np.nan, dtype)[::-1]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_every_layout(dtype):
    _check_every_layout(blas.MATMUL, dtype)


def _check_every_layout(name, dtype):
    matmul = _strided(getattr(blas, name), dtype)
    rng = np.random.default_rng(0)
    for m, k, n in [(1, 1, 1), (1, 5, 7), (4, 1, 3), (5, 6, 1), (3, 4, 5), (0, 3, 2), (3, 0, 2), (16, 32, 8)]:
        a = rng.standard_normal((m, k)).astype(dtype)
        b = rng.standard_normal((k, n)).astype(dtype)
        want = a.astype(np.float64) @ b.astype(np.float64)
        for av, bv in itertools.product(_layouts(a), _layouts(b)):
            for out in _outs(m, n, dtype):
                matmul(av, bv, out)
                np.testing.assert_allclose(out, want, atol=1e-5, err_msg=f"{m}x{k}x{n} {av.strides} {bv.strides} {out.strides}")


@pytest.mark.slow
def test_scipy_blas_can_be_forced_and_serves_every_layout():
    # (in a process of its own: only the provider in use may be called, see rnnloop.codegen.blas)
    code = ("import numpy as np, test_codegen_blas as t; from rnnloop.codegen import blas\n"
            "print(blas.PROVIDER, blas.MATMUL)\n"
            "for dtype in (np.float32, np.float64): t._check_every_layout('matmul_lp64', dtype)\n")
    env = dict(os.environ, RNNLOOP_BLAS="scipy",
               PYTHONPATH=os.pathsep.join([os.path.dirname(__file__), os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["scipy", "matmul_lp64"]


# Products by an invariant matrix packed into panels (rnnloop.codegen.simd): the kernel's own
# register-blocked product for 1..MAX_ROWS rows; BLAS for the rest. MAX_ROWS and the vector width
# depend on the CPU: test_products_without_avx512 runs these tests again as on a CPU without AVX-512.

def _window(x):
    big = np.full((2 * x.shape[0] + 1, 3 * x.shape[1] + 2), np.nan, x.dtype)
    big[1::2, 2::3] = x
    return big[1::2, 2::3]


@pytest.mark.parametrize("dtype", [np.float32, pytest.param(np.float64, marks=pytest.mark.slow)])
def test_packed_products(dtype):
    matmul = _strided(getattr(simd, simd.MATMUL_PACKED), dtype, panels=True)
    rng = np.random.default_rng(1)
    empty = np.empty((0, 0, 0), dtype)
    # rows: blocks on every tile (simd._tile_rows: 4, 6, 8, 10 and 12 rows with 64-byte vectors, each also
    # holding one fewer; with 32-byte ones six, and four where seven or eight are left: 7 = 4 + 3,
    # 8 = 4 + 4, 14 = 6 + 4 + 4), and what is left, in one or several passes of simd.CHUNK rows;
    # inner sizes across one and several passes of simd.DEPTH; columns: whole panels, a partial
    # one, fewer than a panel. One row: eight panels at a time (64-byte vectors), four at a time,
    # then one at a time, then a partial one.
    shapes = [(2, 1, 1), (5, 3, 17), (6, 255, 16), (7, 257, 40), (13, 600, 33), (4, 2, 9), (128, 20, 24),
              (8, 33, 40), (14, 5, 70), (9, 40, 33), (11, 260, 64), (12, 7, 32), (17, 3, 40), (23, 257, 97),
              (10, 33, 40), (6, 300, 64),
              (1, 1, 1), (1, 9, 64), (1, 300, 17 * 8 + 3), (1, 7, 421), (1, 130, 512)]
    if simd.MAX_ROWS > 2 * simd.CHUNK:
        shapes += [(simd.CHUNK + 1, 3, 17), (2 * simd.CHUNK + 5, 270, 40)]
    for m, k, n in shapes:
        a = rng.standard_normal((m, k)).astype(dtype)
        b = rng.standard_normal((k, n)).astype(dtype)
        want = a.astype(np.float64) @ b.astype(np.float64)
        panels = simd.pack(b, empty, m)
        assert panels.shape[1:] == (k, 2 * simd.VECTOR_BYTES // a.itemsize)
        assert np.array_equal(simd.pack_weights(b), panels)  # the same panels, made at load
        for bv in (np.asfortranarray(b), _window(b)):
            assert np.array_equal(simd.pack(bv, empty, m), panels)
        for av, flip in ((a, False), (_window(a), True)):
            outs = [np.full((m, n), np.nan, dtype)[::-1 if flip else 1] for _ in range(2)]
            for out, backwards in zip(outs, (False, True)):
                matmul(av, b, panels, out, backwards)
                np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4 * k, err_msg=f"{m}x{k}x{n} {out.strides}")
            assert np.array_equal(outs[0], outs[1])  # the panels' order changes no sum


@pytest.mark.parametrize("dtype", [np.float32, pytest.param(np.float64, marks=pytest.mark.slow)])
def test_a_packed_product_shared_with_workers_gives_the_same_bits(dtype):
    """Columns of panels split between the caller and the workers of rnnloop.codegen.pool: each
    column is the same sum in the same order, whoever computes it. Shapes: one row and many, a
    partial last panel, two panels (the least that splits), and one too small to split."""
    from rnnloop.codegen import pool

    matmul = _strided(getattr(simd, simd.MATMUL_PACKED), dtype, panels=True)
    workers = pool.pool(3)
    rng = np.random.default_rng(3)
    width = 2 * simd.VECTOR_BYTES // np.dtype(dtype).itemsize
    for m, k, n in [(1, 256, 1024), (1, 300, 17 * width + 3), (16, 256, 1000), (6, 1024, 2 * width), (2, 3, 40)]:
        a = rng.standard_normal((m, k)).astype(dtype)
        b = rng.standard_normal((k, n)).astype(dtype)
        panels = simd.pack_weights(b)
        want = np.full((m, n), np.nan, dtype)
        matmul(a, b, panels, want, False)
        for backwards in (False, True):
            shared = int(workers.block[pool.SHARED])
            for _ in range(1000):  # (a worker just woken may not run yet: that product runs alone)
                workers.wake()
                got = np.full((m, n), np.nan, dtype)
                matmul(a, b, panels, got, backwards, 3, workers.address)
                assert np.array_equal(got, want), (m, k, n, backwards)
                if m * k * n < simd.SPLIT_WORK or workers.block[pool.SHARED] > shared:
                    break
                time.sleep(0.001)
            if m * k * n < simd.SPLIT_WORK:
                assert workers.block[pool.SHARED] == shared  # (too small: never handed off)
            else:
                assert workers.block[pool.SHARED] > shared


def test_a_napping_worker_is_called_back_by_the_products_of_a_call_already_running():
    """A worker idle for longer than its spin naps; a product that finds it napping calls it back
    (NAPPING -> IDLE) without waiting for it, and a later product of the same call shares with it:
    no wake() in between, as between two loops of one kernel (the layers of an encoder)."""
    from rnnloop.codegen import pool

    matmul = _strided(getattr(simd, simd.MATMUL_PACKED), np.float32, panels=True)
    workers = pool.pool(2)
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((4, 256)).astype(np.float32), rng.standard_normal((256, 1024)).astype(np.float32)
    panels, want = simd.pack_weights(b), np.full((4, 1024), np.nan, np.float32)
    matmul(a, b, panels, want, False)
    workers.wake()
    slot = pool.HEADER  # (the first worker's state)
    deadline = time.monotonic() + 30
    while workers.block[slot] != pool.NAPPING:  # (its spin: about half a millisecond)
        assert time.monotonic() < deadline, f"the worker never napped (state {workers.block[slot]})"
        time.sleep(0.001)
    shared = int(workers.block[pool.SHARED])
    deadline = time.monotonic() + 30
    while workers.block[pool.SHARED] == shared:  # (it notices the call back at the end of its nap)
        assert time.monotonic() < deadline, f"no product was shared (state {workers.block[slot]})"
        got = np.full((4, 1024), np.nan, np.float32)
        matmul(a, b, panels, got, False, 2, workers.address)
        assert np.array_equal(got, want)


def test_callers_back_off_from_a_worker_that_kept_them_waiting():
    """A share that kept its caller waiting (its worker was descheduled: a busy process on its core)
    makes callers leave that worker alone for a while, twice as long when it happens again soon; a
    share done in time changes nothing. The test plays the worker of a block without threads."""
    from rnnloop.codegen import pool

    claim = numba.njit(lambda block: pool.claim(block, 1))
    take_back = numba.njit(nogil=True)(lambda block, own: pool.take_back(block, 0, own))  # (the Timer runs)
    ticks = numba.njit(lambda: pool.ticks())
    if ticks() == 0:
        pytest.skip("no cycle counter on this CPU: callers never back off")
    block = np.zeros(pool.HEADER + pool.SLOT, np.int64)
    block[0], state = 1, pool.HEADER
    block[state] = pool.IDLE

    def started_and_done_after(seconds: float) -> None:
        block[state] = pool.RUNNING
        threading.Timer(seconds, block.__setitem__, (state, pool.DONE)).start()

    assert claim(block) == 1 and block[state] == pool.CLAIMED
    started_and_done_after(0.0)
    time.sleep(0.01)
    assert take_back(block, 10**9) is False and block[state] == pool.IDLE  # (in time: no back-off)
    assert block[pool.BACKED_OFF] == 0 and claim(block) == 1
    started_and_done_after(0.05)
    assert take_back(block, 0) is False and block[state] == pool.IDLE
    assert block[pool.BACKED_OFF] == 1 and block[state + pool.WINDOW] == pool.BACK_OFF
    assert 0 < block[state + pool.UNTIL] <= ticks() + pool.BACK_OFF  # (a pause of BACK_OFF from the wait's end)
    block[state + pool.UNTIL] += 10**12  # (a pause that outlasts this test on any machine)
    assert claim(block) == 0 and block[state] == pool.IDLE  # left alone
    started_and_done_after(0.05)
    assert take_back(block, 0) is False and block[state + pool.WINDOW] == 2 * pool.BACK_OFF  # again, soon
    block[state + pool.UNTIL] = 0  # (the pause over)
    assert claim(block) == 1 and block[state] == pool.CLAIMED
    block[state] = pool.POSTED
    assert take_back(block, 0) is True and block[state] == pool.IDLE  # (not started: the caller's)
    assert block[pool.BACKED_OFF] == 2


def test_a_c_function_the_c_library_lacks_is_one_that_returns_at_once():
    """Where there is no usleep or sched_yield (not a POSIX C library), workers spin without naps."""
    from rnnloop.codegen import pool

    missing = pool._libc("no_such_function_in_libc", numba.int32(numba.uint32))
    assert numba.njit(lambda: missing(7))() == 0


def test_panels_are_made_once_and_only_where_they_serve():
    rng = np.random.default_rng(2)
    b = rng.standard_normal((8, 20)).astype(np.float32)
    empty = np.empty((0, 0, 0), np.float32)
    panels = simd.pack(b, empty, 3)
    assert simd.pack(b, panels, 3) is panels  # a kernel packs its invariant on the first product only
    assert np.all(panels[-1, :, 20 % panels.shape[2]:] == 0)  # the last panel is zero-padded
    unserved = [rng.standard_normal((3, 7))]  # panels of another matrix
    if simd.VECTOR_BYTES == 32:  # AVX2: OpenBLAS is faster for many rows
        assert simd.MAX_ROWS == 128
        assert simd.pack(b, empty, simd.MAX_ROWS + 1) is empty
        unserved.append(rng.standard_normal((simd.MAX_ROWS + 1, 8)))
    else:  # AVX-512: the packed product is faster at every size
        assert simd.VECTOR_BYTES == 64 and simd.MAX_ROWS == np.iinfo(np.int64).max
    for a in unserved:
        out = np.full((a.shape[0], 20), np.nan, np.float32)
        assert not simd.multiply(a.astype(np.float32), panels, out, False)  # nothing written: BLAS takes it
        assert np.isnan(out).all()


def test_products_without_avx512():
    """The packed product tests again in a process whose Numba target lacks AVX-512 (32-byte vectors)."""
    from numba.core.codegen import get_host_cpu_features
    features = get_host_cpu_features()
    if "+avx512f" not in features.split(","):
        pytest.skip("this CPU has no AVX-512: the tests above already ran with 32-byte vectors")
    env = dict(os.environ, NUMBA_CPU_FEATURES=features.replace("+avx512", "-avx512"))
    probe = "from rnnloop.codegen import simd; print(simd.VECTOR_BYTES)"
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["32"]
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-o", "addopts=", "-p", "no:cacheprovider", __file__,
                          "-k", "packed_products or panels_are_made_once"], env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    # float32's packed products and the panels test: float64's case is slow, which this run leaves out
    assert "2 passed" in run.stdout and "skipped" not in run.stdout, run.stdout[-3000:]


_PRODUCT_PROCESS = """
import json, sys
import numpy as np
import rnnloop
from rnnloop.models import lstm_native
model, feeds = lstm_native(batch=2, input_size=8, hidden=16, steps=5)
session = rnnloop.load(model, strict=True)
got = session.run(None, feeds)
want = rnnloop.load(model, backend="interp").run(None, feeds)
[fused] = [p.fused for p in session.plans if p.fused is not None]
kernel = fused.compile()
print(json.dumps({"error": max(float(np.abs(g - w).max()) for g, w in zip(got, want)),
                  "hits": sum(kernel.stats.cache_hits.values()), "source": fused.source}))
"""


@pytest.mark.slow
def test_a_kernel_calling_the_packed_product_loads_from_the_cache_in_a_new_process(tmp_path):
    """The product is reached through a symbol a cached kernel cannot register by compiling: its
    module asks for it (simd.require) when imported, before the kernel loads."""
    env = dict(os.environ, RNNLOOP_CACHE_DIR=str(tmp_path))
    reports = []
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", _PRODUCT_PROCESS], env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-3000:]
        reports.append(json.loads(done.stdout.strip().splitlines()[-1]))
    assert "_s.require('float32')" in reports[0]["source"] and "_s.matmul_packed" in reports[0]["source"]
    assert reports[0]["hits"] == 0 and reports[1]["hits"] == 1  # compiled, then loaded from disk
    assert all(r["error"] < 1e-5 for r in reports)
