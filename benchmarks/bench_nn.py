"""asv benchmarks: pooling and normalisation, rnnloop (compiled) against onnxruntime, one thread each.

Run with `asv run --python=same -b NnOp` (add `--quick` for one sample each). The machines are noisy:
read the track_ ratios, which time both engines interleaved in one call (rnnloop.bench.measure).

`python benchmarks/bench_nn.py [CASE ...]` prints each case's CPU time per call of the calling thread
(robust to other processes taking the cores), rnnloop and onnxruntime interleaved, median and quartiles.
"""

from __future__ import annotations

import os
import sys

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

_RNG = np.random.default_rng(0)
_C = 64


def _vectors(count: int, size: int = _C) -> list[np.ndarray]:
    return [_RNG.standard_normal(size).astype(np.float32) for _ in range(count)]


# name -> (op, attributes, input shape, constant inputs, outputs, opset): the sizes of a small CNN or
# transformer front end
CASES = {
    "maxpool3x3s2": ("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
                     (1, _C, 112, 112), [], 1, 22),
    "maxpool2x2s2-indices": ("MaxPool", {"kernel_shape": [2, 2], "strides": [2, 2]}, (1, _C, 112, 112), [], 2, 22),
    "maxpool1d-k3s1": ("MaxPool", {"kernel_shape": [3], "pads": [1, 1]}, (8, 256, 400), [], 1, 22),
    "avgpool3x3s1": ("AveragePool", {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}, (1, _C, 56, 56), [], 1, 22),
    "avgpool2x2s2": ("AveragePool", {"kernel_shape": [2, 2], "strides": [2, 2]}, (1, _C, 112, 112), [], 1, 22),
    "globalavgpool": ("GlobalAveragePool", {}, (1, 512, 14, 14), [], 1, 22),
    "batchnorm": ("BatchNormalization", {}, (1, _C, 112, 112),
                  _vectors(3) + [_RNG.uniform(0.5, 2, _C).astype(np.float32)], 1, 15),
    "instancenorm": ("InstanceNormalization", {}, (4, _C, 56, 56), _vectors(2), 1, 22),
    "layernorm": ("LayerNormalization", {}, (16, 100, 512), _vectors(2, 512), 1, 17),
    "groupnorm": ("GroupNormalization", {"num_groups": 8}, (4, _C, 56, 56), _vectors(2), 1, 21),
    "lpnorm-axis1": ("LpNormalization", {"axis": 1}, (16, 512, 100), [], 1, 22),
    "mvn": ("MeanVarianceNormalization", {}, (4, _C, 56, 56), [], 1, 13),
}


def case_model(name: str) -> tuple[onnx.ModelProto, dict]:
    """A one-node model of the case and its feed."""
    op, attrs, shape, constants, outputs, opset = CASES[name]
    names = [f"c{k}" for k in range(len(constants))]
    outs = ["y", "i"][:outputs]
    node = helper.make_node(op, ["x", *names], outs, **attrs)
    graph = helper.make_graph(
        [node], name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info(o, TensorProto.INT64 if o == "i" else TensorProto.FLOAT, None) for o in outs],
        [numpy_helper.from_array(v, n) for n, v in zip(names, constants)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
    return model, {"x": _RNG.standard_normal(shape).astype(np.float32)}


def _runner(engine: str, name: str):
    return asv_runner(engine, *case_model(name))


class NnOp:
    """One call of the op: seconds per call of each engine."""

    params = (tuple(CASES), ("rnnloop", "onnxruntime"))
    param_names = ("case", "engine")
    timeout = 300

    def setup(self, case, engine):
        self.run = _runner(engine, case)
        self.run()  # (compiling belongs to bench_loops.Startup's kind of benchmark)

    def time_op(self, case, engine):
        self.run()


class NnOpRatio:
    """rnnloop's time over onnxruntime's on the same op (below 1: faster), interleaved in one call,
    median of 15 each."""

    params = (tuple(CASES),)
    param_names = ("case",)
    timeout = 300

    def setup(self, case):
        self.engines = [Engine("rnnloop", lambda: _runner("rnnloop", case)),
                        Engine("onnxruntime", lambda: _runner("onnxruntime", case))]

    def track_ratio_to_onnxruntime(self, case):
        return asv_ratio(*measure(self.engines, repeat=15))

    track_ratio_to_onnxruntime.unit = "ratio"


def table(names: list[str]) -> None:
    """Prints each case: rnnloop and onnxruntime, median [quartiles] µs of CPU time per call, and the ratio."""
    from bench_signal import cpu_times
    for name in names:
        runs = {"rnnloop": _runner("rnnloop", name), "onnxruntime": _runner("onnxruntime", name)}
        found = cpu_times(runs)
        ratio = found["rnnloop"][1] / found["onnxruntime"][1]
        print(f"{name:22s} " + "  ".join(f"{engine} {q[1]:8.1f} [{q[0]:.1f}-{q[2]:.1f}]" for engine, q in found.items())
              + f"  ratio {ratio:.2f}", flush=True)


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    table(sys.argv[1:] or list(CASES))
