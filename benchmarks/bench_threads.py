"""asv benchmarks of threads (issue 25): rnnloop, onnxruntime and OpenVINO (f32) at their default
threads (every core) and on one thread, on the LSTM/GRU models at batch 16 and 64 (and batch 1,
which only products shared with workers speed up; RNNLOOP_SHARE_PRODUCTS=0 keeps them out), the
stacked bidirectional encoders, the streaming VAD, the CRNN at batch 1 (its convolutions share
their work with a worker) and a chain of elementwise ops on [64, 2048] (one loop nest, its rows
shared with a worker); and one Session serving 2 streams from 2 Python threads.

Run with `asv run --python=same -b Threads`, or `python benchmarks/bench_threads.py [rounds]` for the
table (`--busy`: with a process that keeps one core busy meanwhile, as on a shared server). Nothing
here limits BLAS at import (the other benchmark files hold everything to one thread): each engine
gets the threads its runner asks for.
"""

from __future__ import annotations

import statistics
import threading
import time

import numpy as np

from rnnloop.bench import Engine, measure, onnxruntime_runner, openvino_runner, rnnloop_runner
from rnnloop.models import MODELS

# (model, its arguments): the LSTM/GRU shapes (input 128, hidden 256, 200 steps) and encoders.
CASES = {
    "lstm_loop b16": ("lstm_loop", dict(batch=16, input_size=128, hidden=256, steps=200)),
    "lstm_scan b16": ("lstm_scan", dict(batch=16, input_size=128, hidden=256, steps=200)),
    "lstm_native b16": ("lstm_native", dict(batch=16, input_size=128, hidden=256, steps=200)),
    "gru_loop b16": ("gru_loop", dict(batch=16, input_size=128, hidden=256, steps=200)),
    "gru_native b16": ("gru_native", dict(batch=16, input_size=128, hidden=256, steps=200)),
    "lstm_loop b64": ("lstm_loop", dict(batch=64, input_size=128, hidden=256, steps=200)),
    "lstm_native b64": ("lstm_native", dict(batch=64, input_size=128, hidden=256, steps=200)),
    "gru_native b64": ("gru_native", dict(batch=64, input_size=128, hidden=256, steps=200)),
    "bilstm_encoder b12": ("bilstm_encoder", dict(batch=12)),
    "bigru_encoder b12": ("bigru_encoder", dict(batch=12)),
    # Batch 1 cannot be split by rows: each step's product is shared by columns (codegen/pool.py).
    "lstm_loop b1": ("lstm_loop", dict(batch=1, input_size=128, hidden=256, steps=200)),
    "lstm_native b1": ("lstm_native", dict(batch=1, input_size=128, hidden=256, steps=200)),
    "bilstm_encoder b1": ("bilstm_encoder", dict(batch=1)),
    "vad_stream": ("vad_stream", {}),
    # A convolutional front end at batch 1: its Winograd convolutions on panels shared with a worker.
    "crnn b1": ("crnn", dict(batch=1)),
    # A loop nest of 10 elementwise ops over a tensor of fixed sizes, its rows shared with a worker.
    "chain 64x2048": ("elementwise_chain", dict(ops=10, width=2048, rows=64)),
}
ENGINES = ("rnnloop", "onnxruntime", "openvino")


def engines(case: str, threads: int) -> list[Engine]:
    """rnnloop, onnxruntime and OpenVINO on `threads` threads (0: each one's default)."""
    name, kwargs = CASES[case]
    model, feeds = MODELS[name](**kwargs)
    return [Engine("rnnloop", lambda: rnnloop_runner(model, feeds, "numba", threads)[0]),
            Engine("onnxruntime", lambda: onnxruntime_runner(model, feeds, threads)),
            Engine("openvino", lambda: openvino_runner(model, feeds, threads))]


class Threads:
    """rnnloop's time over onnxruntime's and OpenVINO's, all at their default threads (below 1: faster),
    timed interleaved in one call (median of 7 rounds)."""

    params = (tuple(CASES),)
    param_names = ("model",)
    timeout = 1200

    def setup(self, case):
        self.engines = engines(case, 0)

    def _ratios(self):
        ours, ort, ov = measure(self.engines, repeat=7, threads=0)
        if ours.seconds is None:
            raise RuntimeError(ours.error)
        return ours.seconds / ort.seconds if ort.seconds else float("nan"), \
            ours.seconds / ov.seconds if ov.seconds else float("nan")

    def track_ratio_to_onnxruntime_default_threads(self, case):
        return self._ratios()[0]

    def track_ratio_to_openvino_default_threads(self, case):
        return self._ratios()[1]

    track_ratio_to_onnxruntime_default_threads.unit = track_ratio_to_openvino_default_threads.unit = "ratio"


def streams_speedup(streams: int = 2, chunks: int = 2000) -> float:
    """Throughput of `streams` Python threads, each a stream of chunks through one Session of the
    streaming VAD (one thread per session), over the throughput of one thread doing the same work."""
    import rnnloop
    model, feeds = MODELS["vad_stream"]()
    session = rnnloop.load(model, threads=1)

    def stream():
        state = {k: v for k, v in feeds.items() if k != "x"}
        for _ in range(chunks):
            _, h, c = session.run(None, {**state, "x": feeds["x"]})
            state.update(h=h, c=c)

    stream()
    start = time.perf_counter()
    for _ in range(streams):
        stream()
    alone = time.perf_counter() - start
    workers = [threading.Thread(target=stream) for _ in range(streams)]
    start = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return alone / (time.perf_counter() - start)


class Streams:
    """Throughput of one Session serving 2 streams from 2 Python threads over 1 thread serving both."""

    timeout = 600

    def track_two_streams_throughput(self):
        return streams_speedup()

    track_two_streams_throughput.unit = "x"


if __name__ == "__main__":  # the table: python benchmarks/bench_threads.py [--busy] [rounds [case ... | streams]]
    import subprocess
    import sys
    if "--busy" in sys.argv:  # a process that keeps one core busy meanwhile (a shared server)
        sys.argv.remove("--busy")
        busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        import atexit
        atexit.register(busy.kill)
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    chosen = [c for c in sys.argv[2:] if c != "streams"] if sys.argv[2:] else list(CASES)
    streams = not sys.argv[2:] or "streams" in sys.argv[2:]  # (the case "streams": one Session, 2 threads)
    print(f"median ms per call over {rounds} rounds of 5 interleaved calls (range); ratios: rnnloop's time over each "
          "engine's at the same threads, median (range)")
    print(f"{'model':20s} {'threads':8s} " + " ".join(f"{e:>20s}" for e in ENGINES) + f" {'vs onnxruntime':>18s} {'vs openvino':>18s}")
    for case in chosen:
        for threads in (1, 0):
            made = engines(case, threads)
            times = {e: [] for e in ENGINES}
            for _ in range(rounds):
                for engine, result in zip(ENGINES, measure(made, repeat=5, threads=threads)):
                    times[engine].append(result.seconds if result.seconds else float("nan"))
            cells = [f"{statistics.median(t) * 1e3:7.2f} ({min(t) * 1e3:.1f}-{max(t) * 1e3:.1f})" for t in times.values()]
            ratios = []
            for other in ("onnxruntime", "openvino"):
                r = [a / b for a, b in zip(times["rnnloop"], times[other])]
                ratios.append(f"{statistics.median(r):.2f} ({min(r):.2f}-{max(r):.2f})")
            label = "1" if threads == 1 else "default"
            print(f"{case:20s} {label:8s} " + " ".join(f"{c:>20s}" for c in cells) + " " + " ".join(f"{r:>18s}" for r in ratios))
            sys.stdout.flush()
    if not streams:
        sys.exit(0)
    speedups = [streams_speedup() for _ in range(rounds)]
    print(f"vad_stream, one Session, 2 streams in 2 threads: {np.median(speedups):.2f}x the throughput of 1 thread "
          f"({min(speedups):.2f}-{max(speedups):.2f})")
