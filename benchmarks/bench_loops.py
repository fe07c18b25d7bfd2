"""asv benchmarks: rnnloop and onnxruntime on the same built-in loop models, single-threaded.

Run with `asv run --python=same`; compare engines as ratios within one run (the machines are noisy).
"""

from __future__ import annotations

import rnnloop
from rnnloop.models import lstm_loop, sequence_insert_loop, small_loop

ENGINES = ["rnnloop", "onnxruntime"]


def _session(engine: str, model):
    if engine == "rnnloop":
        session = rnnloop.load(model)
        return lambda feeds: session.run(None, feeds)
    try:
        import onnxruntime as ort
    except ImportError:
        raise NotImplementedError("onnxruntime is not installed")  # asv skips the case
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return lambda feeds: session.run(None, feeds)


class SmallLoop:
    """A 3-op Loop body on a [1, 16] tensor, 1000 iterations."""

    params = ENGINES
    param_names = ["engine"]

    def setup(self, engine):
        model, self.feeds = small_loop(1000)
        self.run = _session(engine, model)

    def time_1000_iterations(self, engine):
        self.run(self.feeds)


class LstmLoop:
    """An LSTM cell written as an ONNX Loop, at the sizes (batch, input, hidden, steps) of the issues."""

    params = (ENGINES, ["1,64,128,200", "1,128,256,200", "16,128,256,200", "64,256,512,100"])
    param_names = ["engine", "size"]
    timeout = 300

    def setup(self, engine, size):
        batch, input_size, hidden, steps = map(int, size.split(","))
        model, self.feeds = lstm_loop(batch, input_size, hidden, steps)
        self.run = _session(engine, model)

    def time_sequence(self, engine, size):
        self.run(self.feeds)


class SequenceInsertLoop:
    """8000 SequenceInsert iterations: O(1) amortised appends in rnnloop, quadratic in onnxruntime."""

    params = ENGINES
    param_names = ["engine"]
    timeout = 120

    def setup(self, engine):
        model, self.feeds = sequence_insert_loop(8000)
        self.run = _session(engine, model)

    def time_8000_inserts(self, engine):
        self.run(self.feeds)
