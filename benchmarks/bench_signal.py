"""asv benchmarks: STFT front ends, rnnloop (compiled) against onnxruntime, one thread each.

Run with `asv run --python=same -b Stft` (add `--quick` for one sample each). The machines are noisy: read
the track_ ratios, which time both engines interleaved in one call (rnnloop.bench.measure), so they hold
when the machine's speed drifts; the time_ benchmarks give each engine's own time.

Sizes, frames x frame length (hop): a streaming VAD chunk of 512 or 576 samples cut into frames of 256
with hop 128 (3 frames, the case rnnloop must not lose), a whisper-like second of 16 kHz audio in frames
of 400 with hop 160 (98 frames, a length no power of two), and the same second in frames of 512.

`python benchmarks/bench_signal.py [FRAMESxLENGTH ...]` prints the table behind rnnloop.codegen.signal's
choice between a product by a twiddle matrix and its FFT: each forced in turn, and onnxruntime, in CPU
time of the calling thread per call (robust to other processes taking the cores), interleaved.
"""

from __future__ import annotations

import os
import sys
import time
import warnings

# One thread everywhere, set before importing rnnloop (see bench_loops.py).
for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from rnnloop.bench import Engine, asv_ratio, asv_runner, measure, onnxruntime_runner

try:
    from threadpoolctl import threadpool_limits
except ImportError:
    pass
else:
    threadpool_limits(1)

# samples x frame length x hop, batch 1, a real signal, a Hann window, onesided
SIZES = ("512x256x128", "576x256x128", "16000x400x160", "16000x512x160")


def stft_model(samples: int, frame: int, hop: int) -> tuple[onnx.ModelProto, dict]:
    """One STFT node as torch.onnx exports torch.stft (constant frame_step, window and frame_length)."""
    window = (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(frame) / frame)).astype(np.float32)
    constants = [numpy_helper.from_array(np.array(hop, np.int64), "frame_step"),
                 numpy_helper.from_array(window, "window"),
                 numpy_helper.from_array(np.array(frame, np.int64), "frame_length")]
    node = helper.make_node("STFT", ["signal", "frame_step", "window", "frame_length"], ["spectra"], onesided=1)
    graph = helper.make_graph([node], "stft", [helper.make_tensor_value_info("signal", TensorProto.FLOAT,
                                                                             [1, samples, 1])],
                              [helper.make_tensor_value_info("spectra", TensorProto.FLOAT, None)], constants)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    feeds = {"signal": np.random.default_rng(0).uniform(-1, 1, (1, samples, 1)).astype(np.float32)}
    return model, feeds


def _runner(engine: str, size: str):
    return asv_runner(engine, *stft_model(*map(int, size.split("x"))))


class Stft:
    """One STFT call: seconds per call of each engine."""

    params = (SIZES, ("rnnloop", "onnxruntime"))
    param_names = ("size", "engine")
    timeout = 300

    def setup(self, size, engine):
        self.run = _runner(engine, size)
        self.run()  # loading and compiling belong to bench_loops.Startup's kind of benchmark

    def time_stft(self, size, engine):
        self.run()


class StftRatio:
    """rnnloop's time over onnxruntime's on the same STFT (below 1: faster), interleaved in one call,
    median of 15 each."""

    params = (SIZES,)
    param_names = ("size",)
    timeout = 300

    def setup(self, size):
        self.engines = [Engine("rnnloop", lambda: _runner("rnnloop", size)),
                        Engine("onnxruntime", lambda: _runner("onnxruntime", size))]

    def track_ratio_to_onnxruntime(self, size):
        return asv_ratio(*measure(self.engines, repeat=15))

    track_ratio_to_onnxruntime.unit = "ratio"


def method_session(model: onnx.ModelProto, method: str):
    """A numba session whose STFT runs as a product ("product") or an FFT ("fft") whatever its length."""
    import rnnloop
    from rnnloop.codegen import signal
    saved = signal.FFT_FROM, signal.MAX_PRODUCT_LENGTH
    signal.FFT_FROM, signal.MAX_PRODUCT_LENGTH = (1 << 62, 1 << 62) if method == "product" else (1, 0)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return rnnloop.load(model, strict=True)
    finally:
        signal.FFT_FROM, signal.MAX_PRODUCT_LENGTH = saved


def cpu_times(runs: dict, rounds: int = 21, sample: float = 0.01) -> dict:
    """Quartiles of each call's CPU time (µs) in `rounds` interleaved samples of about `sample` s each."""
    batch = {}
    for name, run in runs.items():
        run()
        start = time.thread_time()
        run()
        batch[name] = max(1, int(sample / max(time.thread_time() - start, 1e-6)))
    times = {name: [] for name in runs}
    for _ in range(rounds):
        for name, run in runs.items():
            start = time.thread_time_ns()
            for _ in range(batch[name]):
                run()
            times[name].append((time.thread_time_ns() - start) / batch[name] / 1e3)
    return {name: np.percentile(values, [25, 50, 75]) for name, values in times.items()}


def methods_table(sizes: list[tuple[int, int]]) -> None:
    """Prints frames x length: product, FFT and onnxruntime, median [quartiles] µs per call."""
    for frames, length in sizes:
        hop = length // 2 if frames < 10 else 160
        model, feeds = stft_model((frames - 1) * hop + length, length, hop)
        product, fft = method_session(model, "product"), method_session(model, "fft")
        runs = {"product": lambda: product.run(None, feeds), "fft": lambda: fft.run(None, feeds)}
        try:
            runs["onnxruntime"] = onnxruntime_runner(model, feeds)
        except ImportError:
            pass
        found = cpu_times(runs)
        print(f"{frames} x {length}: " + "  ".join(f"{name} {q[1]:.1f} [{q[0]:.1f}-{q[2]:.1f}]"
                                                   for name, q in found.items()), flush=True)


if __name__ == "__main__":
    methods_table([tuple(map(int, a.split("x"))) for a in sys.argv[1:]]
                  or [(3, 64), (3, 128), (3, 256), (3, 512), (3, 1024), (100, 128), (100, 256), (98, 400), (98, 512)])
