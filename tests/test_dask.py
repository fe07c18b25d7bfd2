"""rnnloop.dask on a real cluster: a LocalCluster of two worker processes (a real scheduler, real
pickling, each worker its own Sessions), each mode compared bit for bit with the same graph run in
this one process, and a worker killed in the middle of a run."""

from __future__ import annotations

import logging
import os
import pickle
import signal
import time

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

pytest.importorskip("dask", reason="rnnloop.dask needs dask: pip install 'rnnloop[dask]'")
distributed = pytest.importorskip("distributed", reason="rnnloop.dask's tests need dask.distributed")

import dask  # noqa: E402
import dask.array as da  # noqa: E402
import dask.bag as db  # noqa: E402

import rnnloop  # noqa: E402
import rnnloop.dask as rd  # noqa: E402
from rnnloop import models, portable  # noqa: E402
from rnnloop.codegen.cache import cache_dir  # noqa: E402

SR = {"sr": np.array(16000, np.int64)}


def gru_model(hidden: int = 8, features: int = 4, seed: int = 0) -> onnx.ModelProto:
    """A GRU over x[T, N, features] (batch on axis 1): y[T, 1, N, hidden] and h[1, N, hidden]."""
    rng = np.random.default_rng(seed)
    model = onnx.parser.parse_model(f"""<ir_version: 8, opset_import: ["" : 17]>
    gru (float[T, N, {features}] x) => (float[T, 1, N, {hidden}] y, float[1, N, {hidden}] h) {{
        y, h = GRU <hidden_size = {hidden}> (x, W, R, B)
    }}""")
    for name, shape in (("W", (1, 3 * hidden, features)), ("R", (1, 3 * hidden, hidden)), ("B", (1, 6 * hidden))):
        model.graph.initializer.append(numpy_helper.from_array(rng.uniform(-.5, .5, shape).astype(np.float32), name))
    return model


def dense_model(features: int = 4, width: int = 3) -> onnx.ModelProto:
    """y[N, width] = tanh(x[N, features] @ W): a kernel that compiles in about a second."""
    model = onnx.parser.parse_model(f"""<ir_version: 8, opset_import: ["" : 17]>
    dense (float[N, {features}] x) => (float[N, {width}] y) {{
        p = MatMul(x, W)
        y = Tanh(p)
    }}""")
    w = np.random.default_rng(0).uniform(-.5, .5, (features, width)).astype(np.float32)
    model.graph.initializer.append(numpy_helper.from_array(w, "W"))
    return model


def sequences(count: int, features: int = 4, seed: int = 0) -> list[np.ndarray]:
    """Sequences [T, features] of 3 to 6 steps, lengths interleaved."""
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((3 + k % 4, features)).astype(np.float32) for k in range(count)]


def same(a, b) -> bool:
    """Bit for bit: the same arrays (dtypes, shapes, bytes), or dicts/lists of them."""
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@pytest.fixture(scope="module")
def client():
    """Two worker processes of one thread each, sharing this run's kernel cache (they inherit
    the environment)."""
    saved = os.environ.get("RNNLOOP_CACHE_DIR")
    os.environ["RNNLOOP_CACHE_DIR"] = str(cache_dir())
    cluster = distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                       dashboard_address=None, silence_logs=logging.CRITICAL)
    with distributed.Client(cluster) as c:
        yield c
    cluster.close()
    if saved is None:
        os.environ.pop("RNNLOOP_CACHE_DIR", None)
    else:
        os.environ["RNNLOOP_CACHE_DIR"] = saved


@pytest.fixture(scope="module")
def gru():
    return rnnloop.load(gru_model(), backend="interp")


def loads(client) -> dict[str, int]:
    """How many Sessions each worker process has loaded from pickles so far."""
    return client.run(lambda: portable.loads)


# --- sessions travel ---------------------------------------------------------------------------

def test_a_session_pickles_as_its_model_bytes_and_options(gru):
    data = pickle.dumps(gru)
    made = pickle.loads(data)
    assert made is gru  # (in the process that made it: the same Session, nothing loads)
    moved = portable.portable(gru)
    assert moved.kind == "onnx" and moved.options == {"backend": "interp", "max_iterations": None, "strict": False, "threads": None}
    assert onnx.load_from_string(moved.model).graph.node[0].op_type == "GRU"
    assert len(data) < len(moved.model) + 1000  # the bytes and the options: no arrays computed, no kernels
    other = moved.load()  # another process's view: a new Session from the bytes, which runs the same
    x = sequences(1)[0][:, None]
    assert same(other.run(None, {"x": x}), gru.run(None, {"x": x}))


def test_a_session_built_in_python_travels_as_its_onnx_export():
    net = rnnloop.Network("double")
    x = net.add_input("x", np.float32, ["N", 3])
    net.mark_output(net.op("Add", x, x), "y")
    session = net.compile(backend="interp")
    again = portable.portable(session).load()
    feed = {"x": np.arange(6, dtype=np.float32).reshape(2, 3)}
    assert same(again.run(None, feed), session.run(None, feed))


def test_an_openvino_session_travels_as_its_xml_and_bin(tmp_path):
    ov = pytest.importorskip("openvino")
    from openvino import opset8 as ops
    param = ops.parameter([2, 3], np.float32, name="x")
    result = ops.tanh(ops.multiply(param, ops.constant(np.full((2, 3), 0.5, np.float32))))
    path = tmp_path / "m.xml"
    ov.save_model(ov.Model([result], [param], "m"), str(path), compress_to_fp16=False)
    session = rnnloop.load(str(path), backend="interp")
    moved = portable.portable(session)
    assert moved.kind == "openvino" and moved.weights
    os.remove(path)  # the copy does not need the files any more
    feed = {"x": np.ones((2, 3), np.float32)}
    assert same(moved.load().run(None, feed), session.run(None, feed))


def test_a_model_with_external_data_travels_with_its_data(tmp_path, gru):
    onnx.save(gru_model(), str(tmp_path / "m.onnx"), save_as_external_data=True, all_tensors_to_one_file=True,
              location="m.data", size_threshold=0)
    session = rnnloop.load(str(tmp_path / "m.onnx"), backend="interp")
    moved = portable.portable(session)
    for name in ("m.onnx", "m.data"):
        os.remove(tmp_path / name)  # a worker has neither file
    x = sequences(1)[0][:, None]
    assert same(moved.load().run(None, {"x": x}), gru.run(None, {"x": x}))


def test_threads_of_one_worker_share_its_session():
    items = sequences(64)
    model = rnnloop.load(gru_model(), backend="interp")
    bag = rd.map_bag(model, items, outputs="h", batch_axis=1, batch_size=2, partition_size=4)
    assert same(bag.compute(scheduler="threads", num_workers=4), bag.compute(scheduler="sync"))


@pytest.mark.slow  # (a kernel compiled in the test process, loaded on two workers: tens of seconds cold)
def test_a_compiled_session_runs_on_workers_from_their_kernel_cache(client):
    session = rnnloop.load(dense_model(), backend="numba", strict=True)  # compiled here: the cache has it
    before = loads(client)
    x = np.random.default_rng(0).standard_normal((40, 4)).astype(np.float32)
    futures = [client.submit(lambda s, block: (s.backend, s.run(None, {"x": block})[0]), session, x[k:k + 10],
                             pure=False) for k in range(0, 40, 10)]
    got = client.gather(futures)
    assert all(backend == "numba" for backend, _ in got)
    assert same(np.concatenate([y for _, y in got]), np.concatenate(
        [session.run(None, {"x": x[k:k + 10]})[0] for k in range(0, 40, 10)]))
    middle = loads(client)
    assert all(middle[w] - before[w] <= 1 for w in middle)  # four tasks, one load per worker at most
    # the same model and options through rnnloop.dask: the same key, so the Session already there
    # (threads=None as the Session's: rnnloop.dask's default is one thread)
    y = rd.map_array(dense_model(), da.from_array(x, chunks=(8, 4)), strict=True, threads=None)
    assert same(y.compute(), y.compute(scheduler="sync"))
    after = loads(client)
    assert all(after[w] - before[w] <= 1 for w in after)  # (a worker the tasks missed may load it now)


# --- the four modes, against the same graph in one process -------------------------------------

def test_map_array_declares_outputs_and_matches_one_process(client, gru):
    x = np.random.default_rng(1).standard_normal((5, 23, 4)).astype(np.float32)
    out = rd.map_array(gru, da.from_array(x, chunks=(5, 6, 4)), batch_axis=1)
    assert out["y"].shape == (5, 1, 23, 8) and out["h"].shape == (1, 23, 8)  # before anything runs
    assert out["y"].chunks[2] == (6, 6, 6, 5) and out["h"].dtype == np.float32
    on_cluster = dask.compute(out["y"], out["h"])
    assert same(on_cluster, dask.compute(out["y"], out["h"], scheduler="sync"))
    whole = gru.run(None, {"x": x})
    np.testing.assert_allclose(on_cluster[1], whole[1], atol=1e-6)  # (blocks batch differently: not bitwise)


def test_map_bag_batches_by_length_and_keeps_the_order(client, gru):
    items = sequences(50)
    bag = rd.map_bag(gru, items, outputs="h", batch_axis=1, batch_size=4, partition_size=12)
    got = bag.compute()
    assert len(got) == 50 and same(got, bag.compute(scheduler="sync"))
    for item, h in zip(items, got):  # each item's own result, in the input's order
        np.testing.assert_allclose(h, gru.run(["h"], {"x": item[:, None]})[0][:, 0], atol=1e-6)
    # a bag as given (its partitions), every output as a dict
    mapped = rd.map_bag(gru, db.from_sequence(items, npartitions=3), batch_axis=1).compute()
    np.testing.assert_allclose(np.concatenate([m["h"] for m in mapped]), np.concatenate(got), atol=1e-6)
    assert mapped[7]["y"].shape == (len(items[7]), 1, 8)


def test_map_frame_adds_a_column_per_output(client, gru):
    import pandas as pd
    dd = pytest.importorskip("dask.dataframe")
    items = sequences(30)
    with dask.config.set({"dataframe.convert-string": False}):
        frame = dd.from_pandas(pd.DataFrame({"audio": items, "id": range(30)}), npartitions=4)
    mapped = rd.map_frame(gru, frame, "audio", outputs={"h": "state"}, batch_axis=1)
    assert list(mapped.columns) == ["audio", "id", "state"]
    got = mapped.compute()
    assert list(got["id"]) == list(range(30))
    assert same(list(got["state"]), list(mapped.compute(scheduler="sync")["state"]))
    np.testing.assert_allclose(got["state"].iloc[11], gru.run(["h"], {"x": items[11][:, None]})[0][:, 0], atol=1e-6)


def test_stream_runs_each_recording_in_order_with_its_state_fed_back(client):
    model, _ = models.vad_stream(chunk=128, hidden=16)
    vad = rnnloop.load(model, backend="interp")
    rng = np.random.default_rng(3)
    recordings = [rng.uniform(-1, 1, n).astype(np.float32) for n in (1000, 128, 700, 3 * 128, 5)]
    bag = rd.stream(vad, recordings, chunk=128, feeds=SR)
    got = bag.compute()
    assert [p.shape for p in got] == [(8, 1, 1), (1, 1, 1), (6, 1, 1), (3, 1, 1), (1, 1, 1)]
    assert same(got, bag.compute(scheduler="sync"))
    # by hand: chunk after chunk, the last one padded with zeros, h and c fed back
    h = c = np.zeros((2, 1, 16), np.float32)
    probs = []
    for k in range(0, 700, 128):
        piece = np.zeros(128, np.float32)
        piece[:len(recordings[2][k:k + 128])] = recordings[2][k:k + 128]
        prob, h, c = vad.run(None, {"x": piece[None], **SR, "h": h, "c": c})
        probs.append(prob)
    assert same(got[2], np.stack(probs))


def test_stream_with_context_and_an_explicit_state_pair(client):
    model, _ = models.vad_conv(chunk=256, hidden=16)
    vad = rnnloop.load(model, backend="interp")
    recording = np.random.default_rng(4).uniform(-1, 1, 256 * 3).astype(np.float32)
    bag = rd.stream(vad, [recording], chunk=256, context=64, state={"state": "state_out"}, feeds=SR,
                    return_state=True)
    (probs, final), = bag.compute()
    state, expected = np.zeros((2, 1, 16), np.float32), []
    for k in range(3):
        piece = np.concatenate([np.zeros(64, np.float32), recording])[256 * k:256 * k + 320]
        prob, state = vad.run(None, {"x": piece[None], **SR, "state": state})
        expected.append(prob)
    assert same(probs, np.stack(expected)) and same(final["state"], state)


def test_stream_of_feature_frames_keeps_the_short_last_chunk_and_concatenates(client):
    model, _ = models.fsmn_stream(frames=4, features=6, dim=5, order=3, layers=2, classes=3)
    fsmn = rnnloop.load(model, backend="interp")
    recordings = [np.random.default_rng(k).standard_normal((n, 6)).astype(np.float32) for k, n in enumerate((10, 3, 8))]
    got = rd.stream(fsmn, recordings, chunk=4, last="keep", axis=1, outputs="probs").compute()
    assert [p.shape for p in got] == [(1, 10, 3), (1, 3, 3), (1, 8, 3)]
    caches = {f"cache{j}": np.zeros((1, 5, 2), np.float32) for j in range(2)}
    expected = []
    for k in range(0, 10, 4):  # chunks of 4, 4 and 2 frames, the caches fed back
        probs, *outs = fsmn.run(None, {"x": recordings[0][None, k:k + 4], **caches})
        caches = dict(zip(caches, outs))
        expected.append(probs)
    assert same(got[0], np.concatenate(expected, axis=1))


def test_models_of_several_inputs_take_dicts_of_arrays():
    model = onnx.parser.parse_model("""<ir_version: 8, opset_import: ["" : 17]>
    mix (float[N, T] a, float[T, N] b, float scale) => (float[N, T] y) {
        bt = Transpose(b)
        s = Add(a, bt)
        y = Mul(s, scale)
    }""")
    rng = np.random.default_rng(6)
    a, b = rng.standard_normal((10, 3)).astype(np.float32), rng.standard_normal((3, 10)).astype(np.float32)
    scale = {"scale": np.array(2, np.float32)}
    y = rd.map_array(model, {"a": da.from_array(a, chunks=4), "b": da.from_array(b, chunks=(3, 4))},
                     batch_axis={"a": 0, "b": 1}, feeds=scale, backend="interp")
    assert y.chunks == ((4, 4, 2), (3,))
    assert same(y.compute(scheduler="sync"), (a + b.T) * np.float32(2))
    items = [{"a": a[k], "b": b[:, k]} for k in range(10)]
    got = rd.map_bag(model, items, batch_axis={"a": 0, "b": 1}, feeds=scale, backend="interp").compute(scheduler="sync")
    assert same(np.stack(got), (a + b.T) * np.float32(2))


# --- failures -------------------------------------------------------------------------------------

def test_a_failing_item_is_named_with_the_original_error(client, gru):
    items = sequences(30)
    items[17] = items[17][:, :3]  # 3 features where the model takes 4
    with pytest.raises(rnnloop.InputError, match=r"item 17: input 'x' must have size 4 on axis 2"):
        rd.map_bag(gru, items, outputs="h", batch_axis=1, partition_size=8).compute()
    with pytest.raises(rnnloop.InputError, match=r"item 3 of partition 2: input 'x' must have size 4"):
        rd.map_bag(gru, db.from_sequence(items, partition_size=7), batch_axis=1).compute()
    lookup = onnx.parser.parse_model("""<ir_version: 8, opset_import: ["" : 17]>
    lookup (int64[N] i) => (float[N, 2] y) {
        table = Constant <value = float[3, 2] {1, 2, 3, 4, 5, 6}> ()
        y = Gather(table, i)
    }""")
    indices = np.zeros(30, np.int64)
    indices[14] = 7  # out of the table's 3 rows: the block of items 10 to 19 fails, item 14 alone too
    with pytest.raises(rnnloop.RunError, match=r"item 14: .*Gather"):
        rd.map_array(lookup, da.from_array(indices, chunks=10), backend="interp").compute()


def test_a_failing_chunk_of_a_recording_is_named(client):
    model, _ = models.vad_stream(chunk=128, hidden=16)
    vad = rnnloop.load(model, backend="interp")
    recordings = [np.zeros(0, np.float32), np.zeros(300, np.float32), np.zeros(300, np.float64)]
    with pytest.raises(rnnloop.InputError, match=r"recording 2, chunk 0 \(steps 0 to 128\): input 'x' must be float32"):
        rd.stream(vad, recordings, chunk=128, feeds=SR).compute()


def test_a_worker_killed_mid_run_loses_nothing(client, gru):
    items = sequences(96)
    expected = rd.map_bag(gru, items, outputs="h", batch_axis=1, partition_size=6).compute(scheduler="sync")

    def slowly(item):
        time.sleep(0.04)  # 0.25 s a partition, 4 s of work: the kill lands in the middle
        return item

    bag = rd.map_bag(gru, db.from_sequence(items, partition_size=6).map(slowly), outputs="h", batch_axis=1)
    future = client.compute(bag)
    pids = client.run(os.getpid)
    victim = sorted(pids)[0]
    deadline = time.monotonic() + 30
    outputs = {str(key) for key in bag.__dask_keys__()}

    def held() -> int:  # partitions of the result in the victim's memory
        return len(outputs & {str(key) for key in client.has_what().get(victim, ())})
    while not held() and time.monotonic() < deadline:
        time.sleep(0.05)  # until that worker holds results: the kill must lose finished work too
    assert held() and not future.done()
    os.kill(pids[victim], signal.SIGKILL)
    got = future.result(timeout=120)
    assert len(got) == 96 and same(got, expected)  # every item once, in order, as computed in one process
    client.wait_for_workers(2, timeout=60)
    assert victim not in client.run(os.getpid)  # (that worker did die, and another took its place)


@pytest.mark.slow  # (two workers compile vad_conv's kernel when the cache is cold: a minute)
def test_the_readmes_dask_example_runs(client, tmp_path, monkeypatch, capsys):
    import re
    from pathlib import Path

    from scipy.io import wavfile
    text = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    section = text[text.index("## Past one machine: Dask\n"):]
    section = section[:section.index("\n## ")]
    block = re.findall(r"```python\n(.*?)```", section, re.DOTALL)[0]
    local = "Client(LocalCluster(n_workers=2, threads_per_worker=1))"
    assert local in block
    (tmp_path / "recordings").mkdir()
    rng = np.random.default_rng(5)
    for k, seconds in enumerate((1.0, 0.3, 2.2)):
        samples = (rng.uniform(-0.5, 0.5, int(16000 * seconds)) * 32768).astype(np.int16)
        wavfile.write(str(tmp_path / "recordings" / f"r{k}.wav"), 16000, samples)
    np.save(tmp_path / "recordings" / "r3.npy", rng.uniform(-0.5, 0.5, 700).astype(np.float32))
    onnx.save(models.vad_conv()[0], str(tmp_path / "vad.onnx"))
    monkeypatch.chdir(tmp_path)
    before = client.run(os.getcwd)
    client.run(os.chdir, str(tmp_path))  # (the workers read the same relative paths)
    namespace = {"__name__": "__main__"}
    try:
        exec(compile(block.replace(local, f"Client({client.scheduler.address!r})"), "README.md", "exec"),
             namespace)  # noqa: S102  (our own README)
    finally:
        if "client" in namespace:
            namespace["client"].close()
        for worker, cwd in before.items():
            client.run(os.chdir, cwd, workers=[worker])
    printed = capsys.readouterr().out
    assert re.findall(r"recordings/(r\d)\.\w+: speech in \d+% of (\d+) chunks", printed) == [
        ("r0", "32"), ("r1", "10"), ("r2", "69"), ("r3", "2")]
