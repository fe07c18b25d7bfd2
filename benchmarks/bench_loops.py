"""asv benchmarks: rnnloop (fused kernels) and onnxruntime on the built-in loop models, one thread each.

Run with `asv run --python=same` (add `--quick` for one sample each, `-b Rnn` to pick). The machines are
noisy: read rnnloop against onnxruntime within one run, as the `engine` parameter of the same benchmark,
or from the track_ ratios, which time both engines interleaved in one call and so hold when the machine drifts.
"""

from __future__ import annotations

import os

# One thread everywhere, set before importing rnnloop (which loads NumPy's and SciPy's BLAS): these are
# rnnloop.bench.THREAD_ENV. threadpoolctl, when installed, limits the pools already loaded as well.
for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import numpy as np

from rnnloop.bench import (
    Engine,
    measure,
    onnxruntime_runner,
    openvino_ir,
    openvino_runner,
    rnnloop_runner,
    startup_times,
)
from rnnloop.models import MODELS, RNN_SIZES

try:
    from threadpoolctl import threadpool_limits
except ImportError:
    pass
else:
    threadpool_limits(1)

SIZES = tuple("x".join(map(str, size)) for size in RNN_SIZES)  # batch x input x hidden x steps


def _runner(engine: str, name: str, *args: int):
    """A call that runs built-in model `name` once: engine "rnnloop" is the fused (numba) backend."""
    model, feeds = MODELS[name](*args)
    if engine == "rnnloop":
        return rnnloop_runner(model, feeds, "numba")[0]
    try:
        return onnxruntime_runner(model, feeds)
    except ImportError:
        raise NotImplementedError("onnxruntime is not installed") from None  # asv skips the case


def _warm(run):
    """Run once before timing: loading or compiling a kernel belongs to the Startup benchmarks."""
    run()
    return run


class SmallLoop:
    """A 3-op Loop body (Mul, Add, Tanh) on a [1, 16] tensor; divide by `steps` for the time per iteration."""

    params = (("rnnloop", "onnxruntime"), (1000, 100_000))
    param_names = ("engine", "steps")
    timeout = 120

    def setup(self, engine, steps):
        self.run = _warm(_runner(engine, "small_loop", steps))

    def time_loop(self, engine, steps):
        self.run()


class Rnn:
    """LSTM and GRU cells as an ONNX Loop or Scan, and as ONNX's own LSTM/GRU op, on the same weights.

    engine "rnnloop loop" is rnnloop's fused kernel for the Loop model, "rnnloop native" for the model
    with ONNX's LSTM/GRU op; "onnxruntime native" is onnxruntime on that model, the performance
    reference. Sizes: batch x input x hidden x steps.
    """

    params = (("lstm", "gru"), SIZES,
              ("rnnloop loop", "rnnloop scan", "rnnloop native", "onnxruntime loop", "onnxruntime scan",
               "onnxruntime native"))
    param_names = ("cell", "size", "engine")
    timeout = 600

    def setup(self, cell, size, engine):
        runtime, form = engine.split()
        self.run = _warm(_runner(runtime, f"{cell}_{form}", *map(int, size.split("x"))))

    def time_sequence(self, cell, size, engine):
        self.run()


class RnnRatio:
    """rnnloop's time on the Loop/Scan/native-op model over onnxruntime's on the native LSTM/GRU op
    (below 1: faster).

    Both run interleaved in one call (median of 5 each), so the ratio holds when the machine's speed drifts.
    """

    params = (("lstm", "gru"), ("loop", "scan", "native"), SIZES)
    param_names = ("cell", "form", "size")
    timeout = 600

    def setup(self, cell, form, size):
        sizes = tuple(map(int, size.split("x")))
        self.engines = [Engine("rnnloop", lambda: _runner("rnnloop", f"{cell}_{form}", *sizes)),
                        Engine("onnxruntime native", lambda: _runner("onnxruntime", f"{cell}_native", *sizes))]

    def track_ratio_to_onnxruntime_native(self, cell, form, size):
        ours, theirs = measure(self.engines, repeat=5)
        if ours.seconds is None or theirs.seconds is None:
            raise RuntimeError(ours.error or theirs.error)
        return ours.seconds / theirs.seconds

    track_ratio_to_onnxruntime_native.unit = "ratio"


class ScanApi:
    """The LSTM cell as a Python step function run by `rnnloop.scan` on arrays (the library API, its
    per-call overhead included) over onnxruntime's native LSTM op on the same weights (below 1: faster)."""

    params = (SIZES,)
    param_names = ("size",)
    timeout = 600

    def setup(self, size):
        import rnnloop
        from rnnloop.models import lstm_step
        sizes = tuple(map(int, size.split("x")))
        step, init, xs = lstm_step(*sizes)
        self.engines = [Engine("rnnloop.scan", lambda: lambda: rnnloop.scan(step, init, xs)),
                        Engine("onnxruntime native", lambda: _runner("onnxruntime", "lstm_native", *sizes))]

    def track_ratio_to_onnxruntime_native(self, size):
        ours, theirs = measure(self.engines, repeat=5)
        if ours.seconds is None or theirs.seconds is None:
            raise RuntimeError(ours.error or theirs.error)
        return ours.seconds / theirs.seconds

    track_ratio_to_onnxruntime_native.unit = "ratio"


class ScanOverNumpy:
    """`rnnloop.scan` of the LSTM step function (its per-call overhead included) against the same
    step in a Python loop over NumPy arrays: how many times faster (issue target: at least 10 on
    batch 1, input 32, hidden 64, 300 steps)."""

    params = (("1x32x64x300",),)
    param_names = ("size",)
    timeout = 600

    def setup(self, size):
        import rnnloop
        from rnnloop.models import lstm_step
        step, init, xs = lstm_step(*map(int, size.split("x")))

        def numpy_loop():
            carry, ys = init, []
            for x in xs:
                carry, y = step(carry, x)
                ys.append(y)
            return carry, np.stack(ys)

        self.engines = [Engine("rnnloop.scan", lambda: lambda: rnnloop.scan(step, init, xs)),
                        Engine("numpy loop", lambda: numpy_loop)]

    def track_speedup(self, size):
        ours, theirs = measure(self.engines, repeat=5)
        if ours.seconds is None or theirs.seconds is None:
            raise RuntimeError(ours.error or theirs.error)
        return theirs.seconds / ours.seconds

    track_speedup.unit = "times"


def _ir_runner(engine: str, size: str):
    """A call that runs an LSTM as OpenVINO IR once. "rnnloop ir" and "openvino ir": both on the
    TensorIterator OpenVINO makes of the lstm_scan model; "openvino sequence": OpenVINO on the
    LSTMSequence it makes of ONNX's LSTM op (lstm_native), its fastest form of the same LSTM."""
    import importlib.util
    import tempfile
    if importlib.util.find_spec("openvino") is None:
        raise NotImplementedError("openvino is not installed")  # asv skips the case
    form = "native" if engine == "openvino sequence" else "scan"
    model, feeds = MODELS[f"lstm_{form}"](*map(int, size.split("x")))
    path = openvino_ir(model, tempfile.mkdtemp(prefix="rnnloop-asv-"))
    if engine == "rnnloop ir":
        return rnnloop_runner(path, feeds, "numba")[0]
    return openvino_runner(path, feeds)


class OpenVinoIR:
    """An LSTM read from OpenVINO IR (a TensorIterator): rnnloop and OpenVINO (f32, one thread) on the
    same .xml, and OpenVINO on its LSTMSequence. Sizes: batch x input x hidden x steps."""

    params = (SIZES, ("rnnloop ir", "openvino ir", "openvino sequence"))
    param_names = ("size", "engine")
    timeout = 600

    def setup(self, size, engine):
        self.run = _warm(_ir_runner(engine, size))

    def time_sequence(self, size, engine):
        self.run()


class OpenVinoIRRatio:
    """rnnloop's time on the TensorIterator IR over OpenVINO's on the same IR ("ir") or on its
    LSTMSequence ("sequence"); below 1: faster. Interleaved in one call, median of 5 each."""

    params = (("ir", "sequence"), SIZES)
    param_names = ("peer", "size")
    timeout = 600

    def setup(self, peer, size):
        self.engines = [Engine("rnnloop", lambda: _ir_runner("rnnloop ir", size)),
                        Engine("openvino", lambda: _ir_runner(f"openvino {peer}", size))]

    def track_ratio_to_openvino(self, peer, size):
        ours, theirs = measure(self.engines, repeat=5)
        if ours.seconds is None or theirs.seconds is None:
            raise RuntimeError(ours.error or theirs.error)
        return ours.seconds / theirs.seconds

    track_ratio_to_openvino.unit = "ratio"


class SequenceInsert:
    """8000 SequenceInsert iterations: appends cost O(1) amortised in rnnloop; onnxruntime copies the sequence."""

    params = ("rnnloop", "onnxruntime")
    param_names = ("engine",)
    timeout = 120

    def setup(self, engine):
        self.run = _warm(_runner(engine, "sequence_insert_loop", 8000))

    def time_8000_inserts(self, engine):
        self.run()


class WholeModel:
    """Models whose time outside loops matters, one call each: chains of 1, 10 and 100 elementwise
    ops on a [1, 16] tensor (per-call and per-op overhead), the streaming VAD-style model (one
    512-sample chunk), a seq2seq decoder step at batch 12, and stacked bidirectional LSTM and GRU
    encoders as torch exports them (3 layers of 256 per direction, 80 features, 100 steps) at batch
    12 and 1, and the models with front ends (rnnloop.frontend_models: a Conv1d-STFT VAD chunk, a CRNN
    on a 32x100 image, an FSMN chunk of 10 frames). rnnloop's time over its peer's (below 1: faster),
    timed interleaved."""

    params = (("elementwise_chain:1", "elementwise_chain:10", "elementwise_chain:100", "vad_stream",
               "gru_decoder_step", "bilstm_encoder", "bilstm_encoder:1", "bigru_encoder", "bigru_encoder:1",
               "vad_conv", "crnn", "fsmn_stream"),
              ("onnxruntime", "openvino"))
    param_names = ("model", "peer")
    timeout = 300

    def setup(self, model, peer):
        from rnnloop.models import resolve
        name, arguments = resolve(model)
        onnx_model, feeds = MODELS[name](**arguments)
        runner = onnxruntime_runner if peer == "onnxruntime" else openvino_runner
        self.engines = [Engine("rnnloop", lambda: rnnloop_runner(onnx_model, feeds, "numba")[0]),
                        Engine(peer, lambda: runner(onnx_model, feeds))]

    def track_ratio(self, model, peer):
        ours, theirs = measure(self.engines, repeat=9)
        if ours.seconds is None:
            raise RuntimeError(ours.error)
        if theirs.seconds is None:
            raise NotImplementedError(theirs.error)  # the peer is not installed: asv skips the case
        return ours.seconds / theirs.seconds

    track_ratio.unit = "ratio"


STARTUP_MODELS = ("small_loop", "lstm_loop", "lstm_scan", "gru_loop", "gru_scan", "vad_stream", "bilstm_encoder",
                  "vad_conv", "crnn", "fsmn_stream")


class Startup:
    """Seconds to the first result in a new process: cold (empty kernel cache: load, generate, compile, run)
    and warm (the cache filled: load and run, after `import rnnloop`), at batch 1, input 16, hidden 32, 20 steps
    (the VAD-style models, the CRNN and the FSMN at their own sizes; the encoder with its 3 bidirectional
    layers, 6 loops)."""

    params = STARTUP_MODELS
    param_names = ("model",)
    timeout = 1200

    def setup_cache(self):
        # One cold process and three warm ones per model, shared by both track_ benchmarks.
        times = {}
        for name in STARTUP_MODELS:
            own = ("vad_stream", "vad_conv", "crnn", "fsmn_stream")
            sizes = {"small_loop": (20,), **dict.fromkeys(own, ())}.get(name, (1, 16, 32, 20))
            model, feeds = MODELS[name](*sizes)
            startup = startup_times(model, feeds)
            times[name] = {"cold": startup.cold, "warm": startup.warm}
        return times

    def track_cold_compile(self, times, model):
        return times[model]["cold"]

    def track_warm_load(self, times, model):
        return times[model]["warm"]

    track_cold_compile.unit = track_warm_load.unit = "seconds"
