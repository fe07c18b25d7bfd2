"""Threads (issue 25): which models split their batch over threads (batching.plan), and that a split
call gives the unsplit call's results; the thread setting; fork; one Session in many threads."""

from __future__ import annotations

import re

import multiprocessing
import os
import threading
import time

import numpy as np
import onnx
import pytest
from onnx import helper

import rnnloop
from rnnloop import batching, models
from rnnloop import threads as rthreads
from rnnloop.errors import RnnloopError


def _splits(model) -> tuple[list, str | None]:
    return batching.plan(rnnloop.load(model, backend="interp").graph)


@pytest.mark.parametrize("name, inputs, outputs", [
    ("lstm_loop", (1, 0, 0), (0, 0, 1)), ("lstm_scan", (1, 0, 0), (0, 0, 1)), ("lstm_native", (1, 0, 0), (0, 0, 1)),
    ("gru_loop", (1, 0), (0, 1)), ("gru_native", (1, 0), (0, 1)),
])
def test_the_benchmark_models_split_along_their_batch_axes(name, inputs, outputs):
    splits, why = _splits(models.MODELS[name](batch=2, steps=3)[0])
    assert splits == [batching.Split(inputs, outputs)], why


def test_a_stacked_bidirectional_encoder_splits_through_its_shape_arithmetic():
    """torch's export reads the batch size with Shape/Gather, builds the zero states with
    ConstantOfShape and reshapes each layer's output by a computed shape: all proved to keep rows apart."""
    splits, why = _splits(models.bilstm_encoder(batch=2, steps=3, layers=2, hidden=8, input_size=4)[0])
    assert splits and splits[0] == batching.Split((1,), (1, 1, 1)), why


def _model(body: str, inputs: str, outputs: str, **initializers) -> onnx.ModelProto:
    text = f"""<ir_version: 8, opset_import: ["" : 17]>
    g ({inputs}) => ({outputs}) {{
        {body}
    }}"""
    model = onnx.parser.parse_model(text)
    model.graph.initializer.extend(helper.make_tensor(k, onnx.TensorProto.FLOAT if v.dtype == np.float32 else
                                                      onnx.TensorProto.INT64, v.shape, v.reshape(-1).tolist())
                                   for k, v in initializers.items())
    return model


@pytest.mark.parametrize("body, output, why", [
    ("y = ReduceSum <keepdims = 1> (x, axes0)", "float[1, 4] y", "ReduceSum"),  # a sum over the rows
    ("y = Softmax <axis = 0> (x)", "float[B, 4] y", "Softmax"),  # normalised over the rows
    ("y = Reshape(x, flat)", "float[N] y", "Reshape"),  # [B, 4] -> [4B]: each part's rows land elsewhere
    ("y = MatMul(w, x)", "float[3, 4] y", "MatMul"),  # the rows are the contracted axis
    ("y = Add(x, table)", "float[B, 4] y", "Add"),  # a constant with one row per batch row: the parts would need its rows
])
def test_models_that_mix_rows_are_not_split_and_the_reason_names_the_op(body, output, why):
    model = _model(body, "float[B, 4] x", output, axes0=np.array([0], np.int64), flat=np.array([-1], np.int64),
                   w=np.ones((3, 5), np.float32), table=np.ones((6, 4), np.float32))
    splits, reason = _splits(model)
    assert not splits and why in reason


def test_a_loop_whose_condition_reads_the_rows_is_not_split():
    """A while loop that stops when any row's value passes a bound would stop at another iteration in each part."""
    model = _model("""
        zero = Constant <value = int64[1] {0}> ()
        keep = Constant <value = bool {1}> ()
        y = Loop(limit, keep, x) <body = step (int64 i, bool c, float[B, 4] h) => (bool c2, float[B, 4] h2) {
            h2 = Add(h, h)
            s = ReduceMax <keepdims = 0> (h2)
            bound = Constant <value = float {100.0}> ()
            c2 = Less(s, bound)
        }>""", "float[B, 4] x, int64 limit", "float[B, 4] y")
    splits, reason = _splits(model)
    assert not splits and "ReduceMax" in reason


@pytest.fixture
def always_split(monkeypatch):
    monkeypatch.setattr(rthreads, "SPLIT_MIN_ELEMENTS", 0)


@pytest.mark.parametrize("name", ["lstm_loop", "gru_native"])
def test_a_split_call_gives_the_results_of_the_unsplit_call_to_rounding(name, backend, always_split):
    model, feeds = models.MODELS[name](batch=7, steps=12, hidden=16, input_size=8)
    one = rnnloop.load(model, backend=backend, threads=1)
    three = rnnloop.load(model, backend=backend, threads=3)
    want = one.run(None, feeds)
    got = three.run(None, feeds)
    assert three.run(None, feeds)[0].tobytes() == got[0].tobytes()  # (every call alike)
    for g, w in zip(got, want):  # (to rounding: BLAS orders a row's sums by the block it falls in)
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_an_encoder_split_in_parts_agrees_with_onnxruntime(always_split):
    ort = pytest.importorskip("onnxruntime")
    model, feeds = models.bilstm_encoder(batch=5, steps=6, layers=2, hidden=16, input_size=8)
    got = rnnloop.load(model, backend="interp", threads=2).run(None, feeds)  # (compiled parts: the test above)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    want = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"]).run(None, feeds)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def test_one_thread_never_splits_nor_does_one_row_or_a_small_call(monkeypatch):
    model, feeds = models.lstm_loop(batch=4, steps=2, hidden=8, input_size=4)
    assert rnnloop.load(model, backend="interp", threads=1)._splitter is None
    splitter = rnnloop.load(model, backend="interp", threads=2)._splitter
    split = splitter.splits[0]
    assert splitter._size(split, feeds) is None  # 2 x 4 x 4 + 2 x 4 x 8 elements: too few
    monkeypatch.setattr(rthreads, "SPLIT_MIN_ELEMENTS", 0)
    assert splitter._size(split, feeds) == 4
    assert splitter(None, models.lstm_loop(batch=1, steps=2, hidden=8, input_size=4)[1]) is None


def test_the_thread_count_comes_from_the_argument_the_environment_or_the_cores(monkeypatch):
    monkeypatch.delenv(rthreads.ENV, raising=False)
    assert rthreads.resolve(None) == rthreads.available_cores()
    assert rthreads.resolve(0) == rthreads.available_cores()
    assert rthreads.resolve(3) == 3
    monkeypatch.setenv(rthreads.ENV, "1")
    assert rthreads.resolve(None) == 1
    assert rnnloop.load(models.small_loop(steps=2)[0], backend="interp").threads == 1
    monkeypatch.setenv(rthreads.ENV, "many")
    with pytest.raises(RnnloopError, match="RNNLOOP_NUM_THREADS"):
        rthreads.resolve(None)
    for bad in (-1, 1.5, True, "2"):
        with pytest.raises(RnnloopError, match="threads must be"):
            rthreads.resolve(bad)


def test_explain_says_whether_and_along_which_axes_the_batch_splits():
    model = models.lstm_loop(batch=2, steps=2, hidden=8, input_size=4)[0]
    assert "split over threads along X axis 1, h0 axis 0, c0 axis 0" in rnnloop.load(model, backend="interp", threads=2).explain()
    text = rnnloop.load(models.small_loop(steps=2)[0], backend="interp", threads=2).explain()
    assert "not split over threads" in text


def test_an_error_in_a_part_is_raised_once_every_part_has_finished(always_split):
    model = _model("y = Gather <axis = 1> (x, k)", "float[B, 4] x, int64 k", "float[B] y")
    session = rnnloop.load(model, backend="interp", threads=2)
    x = np.ones((4, 4), np.float32)
    with pytest.raises(RnnloopError, match="Gather"):
        session.run(None, {"x": x, "k": np.array(9)})
    np.testing.assert_array_equal(session.run(None, {"x": x, "k": np.array(2)})[0], np.ones(4, np.float32))


def _child_splits(model_bytes, feeds, want, queue) -> None:
    session = rnnloop.load(model_bytes, backend="interp", threads=2)
    rthreads.SPLIT_MIN_ELEMENTS = 0
    got = session.run(None, feeds)
    queue.put(all(np.array_equal(g, w) for g, w in zip(got, want)))


def test_a_forked_child_splits_with_a_pool_of_its_own(always_split):
    """The parent's pool threads do not exist in a forked child: the child makes its own."""
    model, feeds = models.lstm_loop(batch=4, steps=3, hidden=8, input_size=4)
    want = rnnloop.load(model, backend="interp", threads=2).run(None, feeds)  # (split: the parent's pool has a thread)
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_child_splits, args=(model.SerializeToString(), feeds, want, queue))
    child.start()
    child.join(120)
    assert child.exitcode == 0 and queue.get(timeout=5)


def test_one_session_in_two_threads_gives_each_stream_its_sequential_results():
    """Issue 25 item 2: a streaming model, one stream per Python thread, on one Session of one thread
    (an LSTM whose state each call carries to the next; the kernel of the split tests above)."""
    model, feeds = models.lstm_loop(batch=1, steps=5, hidden=8, input_size=4)
    session = rnnloop.load(model, threads=1)
    rng = np.random.default_rng(0)
    streams = [[rng.uniform(-1, 1, feeds["X"].shape).astype(np.float32) for _ in range(20)] for _ in range(2)]

    def run(chunks):
        state, outs = {"h0": feeds["h0"], "c0": feeds["c0"]}, []
        for chunk in chunks:
            h, c, y = session.run(None, {**state, "X": chunk})
            state.update(h0=h, c0=c)
            outs += [h, c, y]
        return outs

    want = [run(s) for s in streams]
    got = [None, None]
    workers = [threading.Thread(target=lambda k=k: got.__setitem__(k, run(streams[k]))) for k in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    for g, w in zip(got, want):
        for a, b in zip(g, w):
            np.testing.assert_array_equal(a, b)


@pytest.mark.slow  # (a kernel of its own: the product-level test in test_codegen_blas runs by default)
def test_a_call_that_is_not_split_shares_its_products_with_a_worker_and_gives_the_same_bits(monkeypatch):
    """Batch 1 is never split by rows: with two threads, each step's product is split by columns
    between the caller and a worker (rnnloop/codegen/pool.py). Every column is the same sum in the
    same order either way, so the results are identical; a session of one thread never shares."""
    from rnnloop.codegen import pool, simd

    hidden = 192  # (h @ R: 192 x 768, over the work from which products are shared)
    assert hidden * 4 * hidden >= simd.SPLIT_WORK
    model, feeds = models.lstm_loop(batch=1, steps=6, hidden=hidden, input_size=16)
    monkeypatch.setenv("RNNLOOP_SHARE_PRODUCTS", "0")
    assert rnnloop.load(model, threads=2).options.pool is None  # (the way to keep the workers out)
    monkeypatch.delenv("RNNLOOP_SHARE_PRODUCTS")
    one, two = rnnloop.load(model, threads=1), rnnloop.load(model, threads=2)
    workers = two.options.pool
    assert one.options.pool is None and workers is pool.pool(2)
    want = one.run(None, feeds)
    shared = int(workers.block[pool.SHARED])
    for _ in range(3):  # (a worker may be asleep at a call's first product: it then runs alone)
        got = two.run(None, feeds)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
    assert workers.block[pool.SHARED] > shared
    assert one.run(None, feeds)[0].tobytes() == want[0].tobytes()


def test_a_session_whose_kernel_shares_with_the_workers_holds_blas_to_one_thread():
    """OpenBLAS's own threads spin after a product and fought the pool's workers for the cores (the
    CRNN at batch 1 ran slower on two threads than on one): a session whose kernel shares with the
    workers and may call BLAS holds BLAS to one thread around its calls."""
    rng = np.random.default_rng(3)
    model = _model("y = MatMul(x, w)\n z = Conv(c, k)", "float[1, 192] x, float[1, 16, 6, 6] c",
                   "float[1, 768] y, float[1, 16, 4, 4] z", w=rng.standard_normal((192, 768)).astype(np.float32),
                   k=rng.standard_normal((16, 16, 3, 3)).astype(np.float32))
    two = rnnloop.load(model, threads=2)
    source = two.kernel_sources()[0][1]
    # (a product shared with workers, and a convolution whose 16 channels take BLAS's products)
    assert "_s.matmul_packed_" in source and "_cv.conv_winograd_float32" in source
    assert two._blas == (1 if rthreads.available_cores() != 1 else None)
    feeds = {"x": rng.standard_normal((1, 192)).astype(np.float32),
             "c": rng.standard_normal((1, 16, 6, 6)).astype(np.float32)}
    for got, want in zip(two.run(None, feeds), rnnloop.load(model, threads=1).run(None, feeds)):
        np.testing.assert_array_equal(got, want)


_FAULTS = """
import resource, sys
import numpy as np
import rnnloop
from rnnloop import models
model, feeds = models.MODELS["elementwise_chain"](1)
rnnloop.load(model)

def call():  # a kernel's call: large arrays freed together at its end
    arrays = [np.ones(8 << 18, np.float32) for _ in range(4)]
    del arrays

call(); call()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10):
    call()
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 10)
"""


@pytest.mark.skipif(not rnnloop.memory.keep_large_blocks(), reason="not glibc, glibc's malloc set by the user, or RNNLOOP_KEEP_MALLOC=0")
@pytest.mark.parametrize("keep", ["1", "0"])
def test_a_session_keeps_large_blocks_so_that_calls_do_not_page_fault(keep):
    import subprocess
    import sys
    env = {**os.environ, "RNNLOOP_KEEP_MALLOC": keep}
    done = subprocess.run([sys.executable, "-c", _FAULTS], capture_output=True, text=True, env=env, check=True)
    faults = float(done.stdout.split()[-1])
    # 32 MiB written a call: up to 8192 pages when each call takes its blocks anew, none when kept.
    assert (faults < 100) if keep == "1" else (faults > 1000)


def _runs_jobs(session, run, want) -> bool:
    """Whether calls (each giving `want`, bit for bit) hand a job to the session's worker within 20
    calls or 3 seconds, whichever is later: a worker is woken when a call starts, but may be late for
    its job (the caller then runs it), more so on a loaded machine."""
    from rnnloop.codegen import pool

    block = session.options.pool.block
    jobs = int(block[pool.JOBS])
    calls, until = 0, time.monotonic() + 3
    while calls < 20 or time.monotonic() < until:
        for g, w in zip(run(), want):
            np.testing.assert_array_equal(g, w)
        if block[pool.JOBS] > jobs:
            return True
        calls += 1
    return False


_LOOP = """
    {out} = Loop(n, keep, x) <body = {name} (int64 i, bool c, float[N, 4] h) => (bool c2, float[N, 4] h2) {{
        c2 = Identity(c)
        k = Mul(i, {bad})
        column = Gather <axis = 1> (h, k)
        wide = Unsqueeze(column, one)
        t = {activation}(h)
        h2 = Add(t, wide)
    }}>"""
_TWO_LOOPS = ("keep = Constant <value = bool {1}> ()"  # (two loops of one code, as a layer's directions)
              + _LOOP.format(out="y", name="first", bad="bad1", activation="Tanh")
              + _LOOP.format(out="z", name="second", bad="bad2", activation="Tanh"))


def test_two_loops_that_read_nothing_of_each_other_run_at_once_and_each_ones_errors_are_raised():
    """Issue 25: the directions of a bidirectional layer run at once, one on a worker of the pool
    (region.concurrent_loops, kernel._emit_concurrent_loops); here two loops that read the same input.
    The results are the bits of one thread; an error in either loop is raised, naming its node,
    once both have stopped, and the session and its worker go on."""
    model = _model(_TWO_LOOPS, "float[N, 4] x, int64 n, int64 bad1, int64 bad2", "float[N, 4] y, float[N, 4] z",
                   one=np.array([1], np.int64))
    one, two = rnnloop.load(model, threads=1), rnnloop.load(model, threads=2)
    [(_, source)] = two.kernel_sources()
    assert "concurrently" in source and "_p.post_job(" in source, source
    assert two.explain().count("at once with Loop") == 2, two.explain()
    x = np.random.default_rng(0).uniform(-1, 1, (3, 4)).astype(np.float32)
    # (20000 iterations: a few milliseconds, time for a worker asleep when the call starts to wake)
    feeds = {"x": x, "n": np.array(20000), "bad1": np.array(0), "bad2": np.array(0)}
    want = one.run(None, feeds)
    assert _runs_jobs(two, lambda: two.run(None, feeds), want)
    for bad, factor in (("bad1", 2), ("bad2", 3)):  # (the first loop reads column 4 of 4 at iteration 2, the second 6)
        with pytest.raises(RnnloopError) as raised:
            one.run(None, {**feeds, bad: np.array(factor)})
        message = str(raised.value)
        assert "Gather" in message and f"index {2 * factor} is out of range" in message, message
        for _ in range(3):
            with pytest.raises(RnnloopError) as again:
                two.run(None, {**feeds, bad: np.array(factor)})
            assert str(again.value) == message
    assert _runs_jobs(two, lambda: two.run(None, feeds), want)
    # Loops of different code run one after the other: one may take far longer than the other.
    other = ("keep = Constant <value = bool {1}> ()" + _LOOP.format(out="y", name="first", bad="bad1", activation="Tanh")
             + _LOOP.format(out="z", name="second", bad="bad2", activation="Sigmoid"))
    apart = rnnloop.load(_model(other, "float[N, 4] x, int64 n, int64 bad1, int64 bad2", "float[N, 4] y, float[N, 4] z",
                                one=np.array([1], np.int64)), threads=2)
    assert "concurrently" not in apart.kernel_sources()[0][1] and "at once" not in apart.explain()


def test_loops_that_do_not_compile_at_once_run_one_after_the_other_with_a_warning(monkeypatch):
    """A bug in the code that runs loops at once costs them a core, not the compiled region."""
    from rnnloop.codegen import kernel

    task = kernel._task

    def broken(g, call, n_ins):
        made = len(g.module.functions)
        name = task(g, call, n_ins)
        if len(g.module.functions) > made:  # (the task's text was added: make it fail to compile)
            g.module.functions[-1] += "\n    _r.no_such_helper(words)"
        return name

    monkeypatch.setattr(kernel, "_task", broken)
    model = _model(_TWO_LOOPS, "float[N, 4] x, int64 n, int64 bad1, int64 bad2", "float[N, 4] y, float[N, 4] z",
                   one=np.array([1], np.int64))
    with pytest.warns(rnnloop.FallbackWarning, match="its loops run one after the other"):
        two = rnnloop.load(model, threads=2)
    assert "concurrently" not in two.kernel_sources()[0][1] and "at once" not in two.explain()
    feeds = {"x": np.ones((2, 4), np.float32), "n": np.array(3), "bad1": np.array(0), "bad2": np.array(0)}
    for g, w in zip(two.run(None, feeds), rnnloop.load(model, backend="interp").run(None, feeds)):
        np.testing.assert_allclose(g, w, rtol=1e-6)


# A nest of elementwise ops over [1, rows, 512], with an integer division that raises on a zero divisor.
_NEST = """
    s = Add(x, bias)
    t = Tanh(s)
    u = Mul(t, x)
    y = Sigmoid(u)
    q = Div(a, b)"""


def _nest_model(rows: str):
    return _model(_NEST, f"float[1, {rows}, 512] x, int64[1, {rows}, 512] a, int64[1, {rows}, 512] b",
                  f"float[1, {rows}, 512] y, int64[1, {rows}, 512] q",
                  bias=np.linspace(-1, 1, 512).astype(np.float32))


def test_a_large_loop_nest_shares_its_rows_with_a_worker_and_gives_the_bits_of_one_thread():
    """Issue 25: a nest of elementwise ops over enough elements (kernel.SPLIT_ELEMENT_OPS over its
    ops) hands the second half of its first axis not of size 1 to an idle worker while the caller
    does the first (kernel.emit_shared_call); the results are the bits of one thread. An error in
    either half (an integer division by zero) is the error of one thread, and the session goes on."""
    from rnnloop.codegen import kernel

    rows = -(-kernel.SPLIT_ELEMENT_OPS // 512)  # (enough for the Div alone to be shared)
    model = _nest_model(str(rows))  # (fixed sizes: no batch axis to split the call along)
    one, two = rnnloop.load(model, threads=1), rnnloop.load(model, threads=2)
    assert two._splitter is None
    [(_, source)] = two.kernel_sources()
    assert source.count("_p.job_of(task") == 2, source  # (both nests: the Div one too)
    rng = np.random.default_rng(0)
    x = rng.uniform(-2, 2, (1, rows, 512)).astype(np.float32)
    a, b = rng.integers(-50, 50, (2, 1, rows, 512))
    b[b == 0] = 7
    feeds = {"x": x, "a": a, "b": b}
    want = one.run(None, feeds)
    np.testing.assert_array_equal(want[1], np.trunc(a / b).astype(np.int64))
    assert _runs_jobs(two, lambda: two.run(None, feeds), want)
    for row in (0, rows - 1):  # (a zero in the caller's half, then in the worker's)
        zero = b.copy()
        zero[0, row, 3] = 0
        with pytest.raises(RnnloopError) as raised:
            one.run(None, {**feeds, "b": zero})
        with pytest.raises(RnnloopError) as again:
            two.run(None, {**feeds, "b": zero})
        assert str(again.value) == str(raised.value) and "Div" in str(raised.value), str(raised.value)
    assert _runs_jobs(two, lambda: two.run(None, feeds), want)
    # A nest the model declares too small, or of sizes it leaves open, is called as it was, with no
    # task to compile (fusion._split_axis).
    for rows in ("4", "R"):
        assert "_p.job_of(" not in rnnloop.load(_nest_model(rows), threads=2).kernel_sources()[0][1]


def test_loop_nests_that_do_not_compile_shared_run_on_one_thread_with_a_warning(monkeypatch):
    """A bug in the code that shares a nest with a worker costs the nest a core, not the region."""
    from rnnloop.codegen import fusion, kernel

    shared = fusion.emit_shared_call

    def broken(g, *args):
        shared(g, *args)
        g.module.functions[-1] += "\n    _r.no_such_helper(words)"  # (the task's text: it fails to compile)

    monkeypatch.setattr(fusion, "emit_shared_call", broken)
    rows = -(-kernel.SPLIT_ELEMENT_OPS // 512)
    model = _nest_model(str(rows))
    with pytest.warns(rnnloop.FallbackWarning, match="its loop nests run on one thread"):
        two = rnnloop.load(model, threads=2)
    assert "_p.job_of(" not in two.kernel_sources()[0][1]
    feeds = {"x": np.ones((1, rows, 512), np.float32), "a": np.ones((1, rows, 512), np.int64),
             "b": np.full((1, rows, 512), 2, np.int64)}
    for g, w in zip(two.run(None, feeds), rnnloop.load(model, backend="interp").run(None, feeds)):
        np.testing.assert_allclose(g, w, rtol=1e-6)


@pytest.mark.slow  # (the encoder test's kernel in test_regions: slow there too)
def test_the_directions_of_a_bidirectional_encoder_run_at_once_and_give_the_bits_of_one_thread():
    model, _ = models.bilstm_encoder(batch=12, input_size=8, hidden=16, steps=5, layers=2)
    one, two = rnnloop.load(model, threads=1), rnnloop.load(model, threads=2)
    source = two.kernel_sources()[0][1]
    # (the two layers are one function, called twice: region.outlined)
    assert source.count("concurrently") == 1 and len(re.findall(r"= part1\(", source)) == 2, source
    # (its rows could be split over the threads: the directions at once, every row in each, are faster)
    assert "not split over threads: its kernel runs loops at once" in two.explain(), two.explain()
    rng = np.random.default_rng(1)
    for batch in (1, 12):
        # (3000 steps: the worker has time to take its job, even on a loaded machine)
        feeds = {"X": rng.standard_normal((3000, batch, 8)).astype(np.float32)}
        want = one.run(None, feeds)
        assert _runs_jobs(two, lambda: two.run(None, feeds), want)
