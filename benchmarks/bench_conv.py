"""asv benchmarks: the convolutions recurrent models put before their recurrence, rnnloop (one compiled
region) and onnxruntime, one thread each, float32, batch 1.

Run with `asv run --python=same -b Conv` (add `--quick` for one sample each). Read rnnloop against
onnxruntime within one run, as the `engine` parameter of the same benchmark, or from the track_
ratios, which time both engines interleaved in one call and so hold when the machine drifts.
"""

from __future__ import annotations

import os

# One thread everywhere, set before importing rnnloop (see bench_loops.py).
for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from rnnloop.bench import Engine, asv_ratio, asv_runner, measure

try:
    from threadpoolctl import threadpool_limits
except ImportError:
    pass
else:
    threadpool_limits(1)

# name -> (x's shape, W's shape, attributes); every one with a bias
SHAPES = {
    # an STFT as a Conv1d: 258 filters (129 frequencies, real and imaginary) of 256 taps, hop 128
    "stft_258x256_hop128": ([1, 1, 576], [258, 1, 256], {"strides": [128]}),
    "conv1d_3tap_128ch": ([1, 128, 64], [128, 128, 3], {"pads": [1, 1]}),
    "conv1d_3tap_64ch": ([1, 64, 64], [64, 64, 3], {"pads": [1, 1]}),
    # the 3x3 Conv2d stack of a CRNN on 32x100 text-line images
    "crnn_3x3_1to64_32x100": ([1, 1, 32, 100], [64, 1, 3, 3], {"pads": [1, 1, 1, 1]}),
    "crnn_3x3_64to128_16x50": ([1, 64, 16, 50], [128, 64, 3, 3], {"pads": [1, 1, 1, 1]}),
    "crnn_3x3_128to256_8x25": ([1, 128, 8, 25], [256, 128, 3, 3], {"pads": [1, 1, 1, 1]}),
    "crnn_3x3_256to256_8x25": ([1, 256, 8, 25], [256, 256, 3, 3], {"pads": [1, 1, 1, 1]}),
    "crnn_3x3_256to256_4x25": ([1, 256, 4, 25], [256, 256, 3, 3], {"pads": [1, 1, 1, 1]}),
    "depthwise1d_128ch_k11": ([1, 128, 100], [128, 1, 11], {"pads": [5, 5], "group": 128}),
}


def conv_model(name: str) -> tuple[onnx.ModelProto, dict]:
    """A one-Conv model of shape `name` with constant weights and bias, and its feed."""
    x_shape, w_shape, attrs = SHAPES[name]
    rng = np.random.default_rng(0)
    w = (rng.standard_normal(w_shape) / np.sqrt(np.prod(w_shape[1:]))).astype(np.float32)
    b = rng.standard_normal(w_shape[0]).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "W", "B"], ["y"], **attrs)], name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "B")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return model, {"x": rng.standard_normal(x_shape).astype(np.float32)}


def _runner(engine: str, name: str):
    return asv_runner(engine, *conv_model(name))


class Conv:
    """One call of each shape's Conv (with its bias); rnnloop compiled (numba) and onnxruntime."""

    params = (tuple(SHAPES), ("rnnloop", "onnxruntime"))
    param_names = ("shape", "engine")
    timeout = 600

    def setup(self, shape, engine):
        self.run = _runner(engine, shape)
        self.run()  # loading or compiling the kernel is not timed

    def time_conv(self, shape, engine):
        self.run()


class ConvRatio:
    """rnnloop's time over onnxruntime's on each shape (below 1: faster), both timed interleaved in one
    call (median of 9 rounds each)."""

    params = (tuple(SHAPES),)
    param_names = ("shape",)
    timeout = 600

    def setup(self, shape):
        self.engines = [Engine("rnnloop", lambda: _runner("rnnloop", shape)),
                        Engine("onnxruntime", lambda: _runner("onnxruntime", shape))]

    def track_ratio_to_onnxruntime(self, shape):
        ours, theirs = measure(self.engines, repeat=9)
        ratio = asv_ratio(ours, theirs)
        if not theirs.agrees:  # (measure compares every engine's output with the first's, rnnloop's)
            raise RuntimeError(f"rnnloop's output differs from onnxruntime's by {theirs.difference}")
        return ratio

    track_ratio_to_onnxruntime.unit = "ratio"


if __name__ == "__main__":  # a quick table without asv: python benchmarks/bench_conv.py [rounds]
    import sys
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    print(f"{'shape':26s} {'rnnloop µs':>11s} {'onnxruntime µs':>15s}  ratio median (range) of {rounds} rounds")
    for shape in SHAPES:
        bench = ConvRatio()
        bench.setup(shape)
        ours, theirs, ratios = [], [], []
        for _ in range(rounds):
            a, b = measure(bench.engines, repeat=9)
            ours.append(a.seconds)
            theirs.append(b.seconds)
            ratios.append(a.seconds / b.seconds)
        print(f"{shape:26s} {np.median(ours) * 1e6:11.1f} {np.median(theirs) * 1e6:15.1f}  "
              f"{np.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})", flush=True)
