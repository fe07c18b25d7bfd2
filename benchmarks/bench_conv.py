"""asv benchmarks: the convolutions recurrent models put before their recurrence, rnnloop (one compiled
region), onnxruntime and OpenVINO (forced to f32), one thread each, float32, batch 1.

Run with `asv run --python=same -b Conv` (add `--quick` for one sample each). Read rnnloop against
its peers within one run, as the `engine` parameter of the same benchmark, or from the track_
ratios, which time the engines interleaved in one call and so hold when the machine drifts.
"""

from __future__ import annotations

import os

# One thread everywhere, set before importing rnnloop (see bench_loops.py).
for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import importlib.util

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from rnnloop.bench import Engine, asv_ratio, asv_runner, measure, openvino_runner

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
    if engine != "openvino":
        return asv_runner(engine, *conv_model(name))
    if importlib.util.find_spec("openvino") is None:
        raise NotImplementedError("openvino is not installed")  # asv skips the case
    return openvino_runner(*conv_model(name))


class Conv:
    """One call of each shape's Conv (with its bias); rnnloop compiled (numba), onnxruntime, OpenVINO."""

    params = (tuple(SHAPES), ("rnnloop", "onnxruntime", "openvino"))
    param_names = ("shape", "engine")
    timeout = 600

    def setup(self, shape, engine):
        self.run = _runner(engine, shape)
        self.run()  # loading or compiling the kernel is not timed

    def time_conv(self, shape, engine):
        self.run()


class ConvRatio:
    """rnnloop's time over onnxruntime's and over OpenVINO's on each shape (below 1: faster), the
    engines timed interleaved in one call (median of 9 rounds each)."""

    params = (tuple(SHAPES),)
    param_names = ("shape",)
    timeout = 600

    def setup(self, shape):
        self.engines = [Engine("rnnloop", lambda: _runner("rnnloop", shape)),
                        Engine("onnxruntime", lambda: _runner("onnxruntime", shape)),
                        Engine("openvino", lambda: _runner("openvino", shape))]

    def _ratio(self, peer: int) -> float:
        ours, theirs = measure([self.engines[0], self.engines[peer]], repeat=9)
        ratio = asv_ratio(ours, theirs)
        if not theirs.agrees:  # (measure compares every engine's output with the first's, rnnloop's)
            raise RuntimeError(f"rnnloop's output differs from {theirs.label}'s by {theirs.difference}")
        return ratio

    def track_ratio_to_onnxruntime(self, shape):
        return self._ratio(1)

    def track_ratio_to_openvino(self, shape):
        return self._ratio(2)

    track_ratio_to_onnxruntime.unit = track_ratio_to_openvino.unit = "ratio"


if __name__ == "__main__":  # a quick table without asv: python benchmarks/bench_conv.py [rounds]
    import sys
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    print(f"{'shape':26s} {'rnnloop µs':>11s} {'onnxruntime µs':>15s} {'openvino µs':>12s}  ratios to each, median "
          f"(range) of {rounds} rounds")

    def spread(values: list) -> str:
        values = [v for v in values if v is not None]
        return f"{np.median(values):.2f} ({min(values):.2f}-{max(values):.2f})" if values else "-"

    for shape in SHAPES:
        bench = ConvRatio()
        bench.setup(shape)
        times: list[list] = [[], [], []]
        for _ in range(rounds):
            for column, result in zip(times, measure(bench.engines, repeat=9)):
                column.append(result.seconds)
        medians = [np.median([t for t in column if t is not None]) * 1e6 if any(column) else float("nan")
                   for column in times]
        ratios = [[a / b if a and b else None for a, b in zip(times[0], column)] for column in times[1:]]
        print(f"{shape:26s} {medians[0]:11.1f} {medians[1]:15.1f} {medians[2]:12.1f}  "
              f"{spread(ratios[0])}  {spread(ratios[1])}", flush=True)
