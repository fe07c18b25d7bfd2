"""asv benchmarks: int8 recurrent models made by onnxruntime's quantiser (issue 27), rnnloop (compiled)
against onnxruntime on the same quantised file, and against rnnloop's own float32 kernel on the model
before quantisation; one thread each, batch 1.

`quantize_dynamic(..., weight_type=QInt8, reduce_range=True)` turns the LSTM into
com.microsoft.DynamicQuantizeLSTM. (reduce_range: 7-bit weights, with which onnxruntime's AVX2 kernel
is exact; rnnloop is exact either way and takes the same time.)

Run with `asv run --python=same -b Quant`, or as a script for a quick table:
`python benchmarks/bench_quant.py [rounds]`.
"""

from __future__ import annotations

import os
import tempfile

for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import numpy as np
import onnx

from rnnloop.bench import Engine, asv_ratio, asv_runner, measure, rnnloop_runner
from rnnloop.models import MODELS

try:
    from threadpoolctl import threadpool_limits
except ImportError:
    pass
else:
    threadpool_limits(1)

# name -> (builder, sizes): the shape first
CASES = {
    "lstm_1x128x256x200": ("lstm_native", dict(batch=1, input_size=128, hidden=256, steps=200)),
    "lstm_1x64x128x200": ("lstm_native", dict(batch=1, input_size=64, hidden=128, steps=200)),
}


def quantised_model(case: str) -> tuple[onnx.ModelProto, onnx.ModelProto, dict]:
    """(float model, its dynamic int8 quantisation, feeds) of a case."""
    from onnxruntime.quantization import QuantType, quantize_dynamic
    builder, sizes = CASES[case]
    model, feeds = MODELS[builder](**sizes)
    with tempfile.TemporaryDirectory() as tmp:
        source, target = os.path.join(tmp, "f.onnx"), os.path.join(tmp, "q.onnx")
        onnx.save(model, source)
        quantize_dynamic(source, target, weight_type=QuantType.QInt8, reduce_range=True)
        quantised = onnx.load(target)
    return model, quantised, feeds


def _engines(case: str) -> list[Engine]:
    model, quantised, feeds = quantised_model(case)

    def ours():
        return rnnloop_runner(quantised, feeds, "numba")[0]

    def theirs():
        return asv_runner("onnxruntime", quantised, feeds)

    def float32():
        return rnnloop_runner(model, feeds, "numba")[0]

    return [Engine("rnnloop int8", ours), Engine("onnxruntime int8", theirs), Engine("rnnloop float32", float32)]


class QuantRatio:
    """rnnloop's time on the quantised model over onnxruntime's on it, and over rnnloop's own float32
    kernel on the float model (below 1: faster), all timed interleaved (median of 9 rounds)."""

    params = (tuple(CASES),)
    param_names = ("case",)
    timeout = 900

    def setup(self, case):
        self.engines = _engines(case)

    def _ratios(self):
        ours, theirs, float32 = measure(self.engines, repeat=9, reference="onnxruntime int8")
        return asv_ratio(ours, theirs), asv_ratio(ours, float32)

    def track_ratio_to_onnxruntime(self, case):
        return self._ratios()[0]

    def track_ratio_to_float32(self, case):
        return self._ratios()[1]

    track_ratio_to_onnxruntime.unit = "ratio"
    track_ratio_to_float32.unit = "ratio"


if __name__ == "__main__":  # python benchmarks/bench_quant.py [rounds]
    import sys
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    print(f"{'case':22s} {'rnnloop int8 µs':>15s} {'onnxruntime int8 µs':>20s} {'rnnloop f32 µs':>15s}  "
          f"ratio to onnxruntime, to float32: median (range) of {rounds} rounds")
    for case in CASES:
        engines = _engines(case)
        times, to_ort, to_f32 = [], [], []
        for _ in range(rounds):
            results = measure(engines, repeat=9, reference="onnxruntime int8")
            if any(r.seconds is None for r in results):
                raise SystemExit(f"{case}: {[r.error for r in results]}")
            if not all(r.agrees for r in results[:2]):
                print(f"  (outputs differ: {[r.difference for r in results]})")
            times.append([r.seconds for r in results])
            to_ort.append(results[0].seconds / results[1].seconds)
            to_f32.append(results[0].seconds / results[2].seconds)
        med = np.median(np.array(times), axis=0) * 1e6
        print(f"{case:22s} {med[0]:15.1f} {med[1]:20.1f} {med[2]:15.1f}  {np.median(to_ort):.2f} "
              f"({min(to_ort):.2f}-{max(to_ort):.2f}), {np.median(to_f32):.2f} ({min(to_f32):.2f}-{max(to_f32):.2f})",
              flush=True)
