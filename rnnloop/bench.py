"""Time rnnloop against onnxruntime and OpenVINO on one model, in one process: on one thread each, or on N.

Every engine gets the same feeds, and its first run's outputs are compared with onnxruntime's. Run time
is the median of interleaved rounds (every engine once per round, so drift on a noisy machine hits all
engines alike), each timing as many runs as last SAMPLE_SECONDS. Cold compile and warm load are timed
in new processes. `rnnloop bench` prints `format_report(bench(...))` or `report_json(...)`; the asv
benchmarks in benchmarks/ reuse the pieces.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import onnx

Run = Callable[[], list]
# One thread for every engine and for the child processes that time startup. Environment variables only
# reach BLAS libraries loaded after they are set (importing rnnloop already loads NumPy's and SciPy's),
# so the process itself limits its pools with threadpoolctl (limited_threads). Numba's own thread pool
# is only used by parallel kernels, which rnnloop does not generate.
THREAD_ENV = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1",
              "RNNLOOP_NUM_THREADS": "1"}
OPENVINO_CONFIG = {"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": 1}  # it defaults to bf16 here
# Outputs agree when every element is within ATOL + RTOL * |reference| (float32 over hundreds of steps).
AGREE_RTOL, AGREE_ATOL = 1e-3, 1e-4
# An optional engine (the interpreter, unless asked for) whose first run takes longer is timed once only.
CHEAP_SECONDS = 0.5
# On several threads, a pause before each engine's sample: onnxruntime's workers spin for about
# 0.1 s after a run (pinned to their cores), and the engine timed next would share its cores with
# them; measured on the 2-core machine, an rnnloop call split over both cores took 30-33 ms within
# that time against 18 ms after it. Then one untimed run wakes the engine's own threads (asleep
# after the pause), and the sample lasts THREADED_SAMPLE_SECONDS.
SETTLE_SECONDS = 0.25
THREADED_SAMPLE_SECONDS = 0.05


def thread_env(threads: int) -> dict[str, str]:
    """THREAD_ENV for `threads` threads per engine; nothing for 0 (every library's default)."""
    return {k: str(threads) for k in THREAD_ENV} if threads else {}


def can_limit_threads() -> bool:
    """Whether threadpoolctl is installed, so that limited_threads() limits the BLAS pools already loaded."""
    try:
        import threadpoolctl  # noqa: F401
    except ImportError:
        return False
    return True


def _started_with(threads: int) -> bool:
    """Whether thread_env(threads) is in the environment (as set before this process started and loaded BLAS)."""
    return all(os.environ.get(k) == v for k, v in thread_env(threads).items())


@contextlib.contextmanager
def limited_threads(threads: int):
    """Limit the BLAS pools already loaded (NumPy's; SciPy's, which Numba's np.dot calls) to `threads`
    threads; 0 leaves them as they are."""
    if not threads or not can_limit_threads():
        yield False
        return
    from threadpoolctl import threadpool_limits
    with threadpool_limits(threads):
        yield True


def single_threaded():
    """limited_threads(1)."""
    return limited_threads(1)


def rnnloop_runner(model: Any, feeds: dict, backend: str = "numba", threads: int = 1) -> tuple[Run, Any]:
    """A call that runs the model once with rnnloop on `threads` threads (0: its default), and its Session."""
    import rnnloop
    with warnings.catch_warnings():  # a loop that falls back to the interpreter: the report's plan says so
        warnings.simplefilter("ignore", rnnloop.FallbackWarning)
        session = rnnloop.load(model, backend=backend, threads=threads)
    return (lambda: session.run(None, feeds)), session


def onnxruntime_runner(model: Any, feeds: dict, threads: int = 1) -> Run:
    """A call that runs the model once with onnxruntime's CPU provider on `threads` threads (0: its default)."""
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    options.log_severity_level = 4  # a failure surfaces as the exception, reported in the table
    data = model.SerializeToString() if isinstance(model, onnx.ModelProto) else model
    session = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
    return lambda: session.run(None, feeds)


def openvino_runner(model: Any, feeds: dict, threads: int = 1) -> Run:
    """A call that runs the model once with OpenVINO's CPU plugin, in f32 on `threads` threads (0: its default)."""
    import openvino as ov
    core = ov.Core()
    data = model.SerializeToString() if isinstance(model, onnx.ModelProto) else model
    config = {k: v for k, v in OPENVINO_CONFIG.items() if threads or k != "INFERENCE_NUM_THREADS"}
    if threads:
        config["INFERENCE_NUM_THREADS"] = threads
    compiled = core.compile_model(core.read_model(data), "CPU", config)
    request = compiled.create_infer_request()
    outputs = list(compiled.outputs)

    def run():
        result = request.infer(feeds)
        return [np.array(result[o]) for o in outputs]  # a copy: the request reuses its buffers
    return run


def asv_runner(engine: str, model: Any, feeds: dict) -> Run:
    """For asv: a call that runs the model once with engine "rnnloop" (compiled) or "onnxruntime", one
    thread each; NotImplementedError, which asv reports as a skipped case, without onnxruntime."""
    if engine == "rnnloop":
        return rnnloop_runner(model, feeds, "numba")[0]
    try:
        return onnxruntime_runner(model, feeds)
    except ImportError:
        raise NotImplementedError("onnxruntime is not installed") from None


def asv_ratio(ours: "Result", theirs: "Result") -> float:
    """For an asv track_: `ours`'s time over `theirs`'s; RuntimeError when ours did not run,
    NotImplementedError (asv skips the case) when theirs did not (onnxruntime is not installed)."""
    if ours.seconds is None:
        raise RuntimeError(ours.error)
    if theirs.seconds is None:
        raise NotImplementedError(theirs.error)
    return ours.seconds / theirs.seconds


def openvino_ir(model: onnx.ModelProto, directory: str) -> str:
    """The model converted by OpenVINO and saved as IR (f32) in `directory`; returns the .xml path.
    OpenVINO turns a Scan into a TensorIterator, a Loop into a Loop-5 and LSTM/GRU into sequences."""
    import openvino as ov
    source = os.path.join(directory, "model.onnx")
    onnx.save(model, source)
    path = os.path.join(directory, "model.xml")
    ov.save_model(ov.convert_model(source), path, compress_to_fp16=False)
    return path


def max_difference(a: Any, b: Any) -> float:
    """The largest |a - b| over outputs (lists of arrays, sequences as lists); inf when shapes differ."""
    if isinstance(a, (list, tuple)) or isinstance(b, (list, tuple)):
        if not isinstance(a, (list, tuple)) or not isinstance(b, (list, tuple)) or len(a) != len(b):
            return float("inf")
        return max((max_difference(x, y) for x, y in zip(a, b)), default=0.0)
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return float("inf")
    if a.size == 0:
        return 0.0
    return float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64))))


def outputs_agree(actual: Any, reference: Any) -> bool:
    """Same structure and shapes, every element within AGREE_ATOL + AGREE_RTOL * |reference| (NaN == NaN)."""
    if isinstance(actual, (list, tuple)) or isinstance(reference, (list, tuple)):
        return (isinstance(actual, (list, tuple)) and isinstance(reference, (list, tuple))
                and len(actual) == len(reference) and all(map(outputs_agree, actual, reference)))
    a, b = np.asarray(actual), np.asarray(reference)
    if a.shape != b.shape:
        return False
    if a.dtype.kind not in "fc" and b.dtype.kind not in "fc":
        return bool(np.array_equal(a, b))
    return bool(np.allclose(a, b, rtol=AGREE_RTOL, atol=AGREE_ATOL, equal_nan=True))


DEFAULT_TRIP_COUNT = 100


def random_feeds(model: Any, dims: dict[str, int] | None = None,
                 values: dict[str, float] | None = None, seed: int = 0) -> dict[str, np.ndarray]:
    """Feeds for a model's tensor inputs (an onnx.ModelProto, or an rnnloop Session of any model), from
    their declared types.

    Symbolic or unknown dimensions take their size from `dims` (else 1); an input named in `values` is filled
    with that value. Otherwise: integer scalars (trip counts) are DEFAULT_TRIP_COUNT, booleans true
    (conditions), other integer tensors zero (valid as indices), and floats standard normal.
    """
    dims, values = dims or {}, values or {}
    rng = np.random.default_rng(seed)
    feeds = {}
    for name, dtype, shape in _declared_inputs(model):
        shape = tuple(d if isinstance(d, int) else dims.get(d, 1) for d in shape)
        if name in values:
            feeds[name] = np.full(shape, values[name], dtype)
        elif dtype == np.bool_:
            feeds[name] = np.ones(shape, dtype)
        elif dtype.kind in "iu":
            feeds[name] = np.full(shape, DEFAULT_TRIP_COUNT if shape == () else 0, dtype)
        else:
            feeds[name] = rng.standard_normal(shape).astype(dtype)
    return feeds


def _declared_inputs(model: Any):
    """(name, dtype, shape) of each input; a dimension is a size, a symbolic name or None."""
    if not isinstance(model, onnx.ModelProto):  # a Session
        for name in model.graph.inputs:
            t = model.graph.type_of(name)
            if t is None or getattr(t, "dtype", None) is None or t.shape is None:
                raise ValueError(f"input '{name}' is not a tensor of known type and rank; bench makes random "
                                 "tensor feeds only")
            yield name, np.dtype(t.dtype), t.shape
        return
    initializers = {i.name for i in model.graph.initializer}
    for value_info in model.graph.input:
        name, t = value_info.name, value_info.type
        if name in initializers:
            continue
        if not t.HasField("tensor_type"):
            raise ValueError(f"input '{name}' is not a tensor; bench makes random tensor feeds only")
        dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(t.tensor_type.elem_type))
        yield name, dtype, tuple(d.dim_value if d.HasField("dim_value") else d.dim_param or None
                                 for d in t.tensor_type.shape.dim)


def infer_steps(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> int | None:
    """The iteration count of the model's first top-level loop, when a feed sets it (trip count, scanned length)."""
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    for node in model.graph.node:
        if node.op_type == "Loop" and node.input and node.input[0] in feeds:
            return int(feeds[node.input[0]])
        if node.op_type == "Scan" and node.domain in ("", "ai.onnx"):
            attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
            first = len(node.input) - attrs["num_scan_inputs"]
            axes = attrs.get("scan_input_axes") or [1 if opset < 9 else 0]  # Scan-8 leads with a batch axis
            if node.input[first] in feeds:
                return int(np.shape(feeds[node.input[first]])[axes[0]])
        if node.op_type in ("LSTM", "GRU", "RNN") and node.input[0] in feeds:
            layout = next((a.i for a in node.attribute if a.name == "layout"), 0)
            return int(np.shape(feeds[node.input[0]])[1 if layout else 0])
    return None


@dataclass
class Engine:
    """One way to run a model. `make` builds the call (it may fail: the engine is then reported, not timed).

    An `optional` engine is timed only when its first run takes at most CHEAP_SECONDS. An rnnloop engine
    keeps its Session in `session` once made, for the plan.
    """

    label: str
    make: Callable[[], Run]
    optional: bool = False
    session: Any = field(default=None, repr=False)
    model: Any = field(default=None, repr=False)  # what an rnnloop engine loads


@dataclass
class Result:
    """An engine's median seconds per run, or why it did not run.

    `first` is load + first run; `runs` the number of timed runs; `difference` the max |difference| from
    the reference outputs and `agrees` whether they agree within AGREE_RTOL/AGREE_ATOL.
    """

    label: str
    seconds: float | None = None
    first: float | None = None
    runs: int = 0
    difference: float | None = None
    agrees: bool | None = None
    error: str | None = None
    note: str = ""


def _one_line(e: BaseException, width: int = 160) -> str:
    """The exception's type and message on one line, shortened to about `width` characters; of a message that
    lists items ("- LSTM 'x' ...: 'LSTM' is not supported", as UnsupportedModelError's does), the items."""
    items = [line.strip()[2:] for line in str(e).splitlines() if line.strip().startswith("- ")]
    text = f"{type(e).__name__}: " + ("; ".join(items) if items else " ".join(str(e).split()))
    return text if len(text) <= width else text[:width - 3] + "..."


def rnnloop_engine(label: str, model: Any, feeds: dict, backend: str, optional: bool = False,
                   threads: int = 1) -> Engine:
    """An Engine running the model with rnnloop's `backend` on `threads` threads (0: its default), keeping
    the Session for the plan."""
    engine = Engine(label, lambda: None, optional)
    engine.model = model

    def make() -> Run:
        run, engine.session = rnnloop_runner(engine.model, feeds, backend, threads)
        return run
    engine.make = make
    return engine


def measure(engines: list[Engine], repeat: int, warmup: int = 1, reference: str | None = None,
            threads: int = 1) -> list[Result]:
    """Median seconds per run of every engine over `repeat` interleaved rounds after `warmup` untimed rounds,
    with the BLAS pools held to `threads` threads (0: as each engine sets them); on several threads,
    each sample starts after the engine before it has settled (SETTLE_SECONDS) and lasts longer.

    The first run of each engine (not timed with the rest) gives the outputs compared with the `reference`
    engine's (by label; the first engine that ran when it did not).
    """
    results, runs, outputs = [], [], []
    for engine in engines:
        result, run, out = Result(engine.label), None, None
        try:
            start = time.perf_counter()
            run = engine.make()
            loaded = time.perf_counter()
            out = run()
            done = time.perf_counter()
        except Exception as e:  # noqa: BLE001 - any failure of an engine is reported in the table, not raised
            result.error, run = _one_line(e), None
        else:
            result.first = done - start
            if engine.optional and done - loaded > CHEAP_SECONDS:
                result.seconds, result.runs, run = done - loaded, 1, None
                result.note = f"timed once (a run takes over {CHEAP_SECONDS} s)"
        results.append(result)
        runs.append(run)
        outputs.append(out if result.error is None else None)
    ran = [i for i, r in enumerate(results) if r.error is None]
    ref = next((i for i in ran if results[i].label == reference), ran[0] if ran else None)
    for i in ran:
        results[i].difference = max_difference(outputs[i], outputs[ref])
        results[i].agrees = outputs_agree(outputs[i], outputs[ref])
    times: list[list[float]] = [[] for _ in engines]
    with limited_threads(threads):
        # A sample times enough runs to last SAMPLE_SECONDS: one call of a few microseconds is
        # below what a single reading of the clock resolves.
        sample = SAMPLE_SECONDS if threads == 1 else THREADED_SAMPLE_SECONDS
        batches = [_batch(run, sample) if run is not None else 0 for run in runs]
        for round_ in range(warmup + repeat):
            for run, batch, samples in zip(runs, batches, times):
                if run is not None:
                    if threads != 1:
                        time.sleep(SETTLE_SECONDS)
                        run()
                    start = time.perf_counter()
                    for _ in range(batch):
                        run()
                    if round_ >= warmup:
                        samples.append((time.perf_counter() - start) / batch)
    for result, samples in zip(results, times):
        if samples:
            result.seconds, result.runs = statistics.median(samples), len(samples)
    return results


SAMPLE_SECONDS = 0.002


def _batch(run: Run, seconds: float = SAMPLE_SECONDS) -> int:
    """How many runs one sample times: as many as last `seconds` (at least one)."""
    start = time.perf_counter()
    run()
    once = time.perf_counter() - start
    return max(1, min(100_000, int(seconds / max(once, 1e-9))))


# The child that times startup: import rnnloop, then load + first run.
_STARTUP_CHILD = """
import json, sys, time
import numpy as np
with np.load(sys.argv[2], allow_pickle=False) as data:
    feeds = dict(data)
start = time.perf_counter()
import rnnloop
imported = time.perf_counter()
rnnloop.load(sys.argv[1], backend=sys.argv[3]).run(None, feeds)
done = time.perf_counter()
print(json.dumps({"import": imported - start, "load_run": done - imported}))
"""


@dataclass
class Startup:
    """Seconds, each measured in a new Python process.

    cold: load + first run with an empty kernel cache (generates and compiles every kernel of the
    model); rnnloop's own helpers, which compile once per machine, come from this process's cache.
    warm: load + first run after `import rnnloop`, cache filled by the cold process (median of `warm_runs`).
    import_: `import rnnloop` in the warm processes; process: a whole warm process, interpreter start to exit.
    """

    cold: float
    warm: float
    import_: float
    process: float
    warm_runs: int = 3


def _child(model_path: str, feeds_path: str, backend: str, env: dict, timeout: float) -> dict:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", _STARTUP_CHILD, model_path, feeds_path, backend], env=env,
                          check=False, capture_output=True, text=True, timeout=timeout)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"the timing process failed:\n{done.stderr[-2000:]}")
    return {**json.loads(done.stdout.strip().splitlines()[-1]), "process": wall}


def startup_times(model: Any, feeds: dict, backend: str = "numba", warm_runs: int = 3,
                  timeout: float = 600) -> Startup:
    """Cold compile and warm load (see Startup), in new processes of this Python with a fresh kernel cache."""
    import rnnloop
    with tempfile.TemporaryDirectory(prefix="rnnloop-bench-") as tmp:
        model_path = model if isinstance(model, str) else os.path.join(tmp, "model.onnx")
        if not isinstance(model, str):
            onnx.save(model, model_path)
        feeds_path = os.path.join(tmp, "feeds.npz")
        np.savez(feeds_path, **feeds)
        package_root = os.path.dirname(os.path.dirname(os.path.abspath(rnnloop.__file__)))
        env = {**os.environ, **THREAD_ENV, "RNNLOOP_CACHE_DIR": os.path.join(tmp, "cache"),
               "PYTHONPATH": os.pathsep.join(p for p in [package_root, os.environ.get("PYTHONPATH")] if p)}
        env.pop("RNNLOOP_DEBUG", None)
        from .codegen.cache import cache_dir
        if (cache_dir() / "runtime").is_dir():  # (compiled once per machine: not this model's cost)
            shutil.copytree(cache_dir() / "runtime", os.path.join(tmp, "cache", "runtime"))
        cold = _child(model_path, feeds_path, backend, env, timeout)
        warm = [_child(model_path, feeds_path, backend, env, timeout) for _ in range(warm_runs)]
    return Startup(cold=cold["load_run"], warm=statistics.median(w["load_run"] for w in warm),
                   import_=statistics.median(w["import"] for w in warm),
                   process=statistics.median(w["process"] for w in warm), warm_runs=warm_runs)


def versions(openvino: bool = True) -> dict[str, str]:
    """Versions of rnnloop and of the engines and libraries it is timed with (those installed)."""
    found = {}
    for name in ("rnnloop", "numpy", "numba", "onnxruntime") + (("openvino",) if openvino else ()):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            found[name] = importlib.metadata.version(name)
    return found


@dataclass
class Report:
    """What `rnnloop bench` prints: the results, the plan, the startup times and how they were measured.

    Ratios divide by `reference` (onnxruntime on the same model) and `native_reference` (onnxruntime on the
    model holding ONNX's own LSTM/GRU op), when those ran.
    """

    title: str
    results: list[Result]
    repeat: int
    warmup: int = 1
    steps: int | None = None
    reference: str | None = None
    native_reference: str | None = None
    plan: str = ""
    startup: Startup | None = None
    startup_error: str | None = None
    threads_limited: bool = True
    threads: int = 1  # per engine; 0: each engine's default
    versions: dict[str, str] = field(default_factory=dict)

    def seconds_of(self, label: str | None) -> float | None:
        return next((r.seconds for r in self.results if r.label == label), None)

    def disagreeing(self) -> list[Result]:
        return [r for r in self.results if r.agrees is False]


def engines_for(model: Any, feeds: dict, *, native: tuple[str, Any, dict] | None = None,
                interp: bool | None = None, openvino: bool = True, threads: int = 1) -> list[Engine]:
    """rnnloop (numba; interp if asked, or when cheap with interp=None), onnxruntime and OpenVINO on `model`,
    and each engine on `native` = (op name, model, feeds), a peer holding ONNX's own LSTM/GRU op; each on
    `threads` threads (0: its default)."""
    models = [("", model, feeds)]
    if native is not None:
        op, native_model, native_feeds = native
        models.append((f" {op} op", native_model, native_feeds))
    engines = []
    for suffix, m, f in models:
        engines.append(rnnloop_engine(f"rnnloop numba{suffix}", m, f, "numba", threads=threads))
        if interp is not False and not suffix:
            engines.append(rnnloop_engine("rnnloop interp", m, f, "interp", optional=interp is None, threads=threads))
    if openvino and isinstance(model, onnx.ModelProto) and importlib.util.find_spec("openvino"):
        # the model as OpenVINO converts it (IR), read by rnnloop: compare with the openvino engine
        engine = rnnloop_engine("rnnloop numba ov-ir", None, feeds, "numba", threads=threads)
        make = engine.make

        def make_from_ir(engine=engine, make=make) -> Run:
            engine.model = openvino_ir(model, tempfile.mkdtemp(prefix="rnnloop-ir-"))
            return make()
        engine.make = make_from_ir
        engines.append(engine)
    openvino_only = isinstance(model, str) and model.lower().endswith(".xml")  # OpenVINO IR
    peers = [] if openvino_only else [("onnxruntime", onnxruntime_runner)]
    if openvino or openvino_only:
        peers.append(("openvino", openvino_runner))
    for name, runner in peers:
        for suffix, m, f in models:
            engines.append(Engine(f"{name}{suffix}", lambda runner=runner, m=m, f=f: runner(m, f, threads)))
    return engines


def bench(model: Any, feeds: dict, *, title: str, steps: int | None = None,
          native: tuple[str, Any, dict] | None = None, repeat: int = 10, warmup: int = 1,
          interp: bool | None = None, openvino: bool = True, startup: bool = False, threads: int = 1) -> Report:
    """Run every engine of `engines_for` on the same feeds, on `threads` threads each (0: its default), and
    time startup if asked; see `format_report`."""
    engines = engines_for(model, feeds, native=native, interp=interp, openvino=openvino, threads=threads)
    results = measure(engines, repeat, warmup, reference="onnxruntime", threads=threads)
    for engine, result in zip(engines, results):
        if engine.label.startswith("rnnloop") and result.error:
            result.error = "n/a: " + result.error  # rnnloop cannot run this model (yet)
        fallbacks = sum(getattr(p.fused, "fallbacks", 0) for p in getattr(engine.session, "plans", [])
                        if getattr(p, "fused", None) is not None)
        if fallbacks:
            result.note = f"a fused loop fell back to the interpreter {fallbacks} times"
    installed = {"openvino": importlib.util.find_spec("openvino") is not None,
                 "onnxruntime": importlib.util.find_spec("onnxruntime") is not None}
    for result in results:
        engine_name = result.label.split()[0]
        if result.error and not installed.get(engine_name, True):
            result.error = f"not installed (pip install {engine_name})"
    ran = {r.label for r in results if r.seconds is not None}
    op = native[0] if native else None
    report = Report(title, results, repeat, warmup, steps,
                    reference="onnxruntime" if "onnxruntime" in ran else None,
                    native_reference=f"onnxruntime {op} op" if f"onnxruntime {op} op" in ran else None,
                    threads_limited=not threads or can_limit_threads() or _started_with(threads),
                    threads=threads, versions=versions(openvino))
    fused = engines[0].session
    if fused is not None:
        report.plan = fused.explain()
    if startup:
        try:
            report.startup = startup_times(model, feeds)
        except Exception as e:  # noqa: BLE001 - reported under the table
            report.startup_error = str(e).strip().splitlines()[-1]
    return report


def _ratio(seconds: float | None, reference: float | None) -> float | None:
    return seconds / reference if seconds is not None and reference else None


def format_report(report: Report) -> str:
    """The table: load + first run, median ms per run and us per step, ratios to onnxruntime, max |difference|."""
    ref, native_ref = report.seconds_of(report.reference), report.seconds_of(report.native_reference)
    op = report.native_reference.split()[1] if report.native_reference else None
    lines = [report.title,
             f"{_threads_phrase(report.threads)}; median of {report.repeat} samples "
             f"(each {SAMPLE_SECONDS * 1000:g} ms or one run) after {report.warmup} warm-up, engines interleaved; "
             + ", ".join(f"{k} {v}" for k, v in report.versions.items())]
    lines[-1:] = textwrap.wrap(lines[-1], 110, break_on_hyphens=False)
    if report.reference:
        lines += textwrap.wrap("vs ort = time / onnxruntime's on this model" +
                               (f"; vs {op} = time / onnxruntime's on ONNX's own {op} op (same weights)" if op else "")
                               + "; max |diff| against onnxruntime's outputs", 110, break_on_hyphens=False)
    header = f"{'engine':<24}{'load+run1 s':>12}{'ms/run':>11}{'us/step':>10}{'vs ort':>8}"
    header += f"{'vs ' + op:>9}" if op else ""
    lines.append(header + f"{'max |diff|':>11}")
    for r in report.results:
        if r.seconds is None:
            lines.append(f"{r.label:<24}{r.error}")
            continue
        row = f"{r.label:<24}{r.first:12.3f}{r.seconds * 1e3:11.4f}"
        row += f"{r.seconds / report.steps * 1e6:10.3f}" if report.steps else f"{'-':>10}"
        for base, width in [(ref, 8)] + ([(native_ref, 9)] if op else []):
            ratio = _ratio(r.seconds, base)
            row += f"{ratio:{width}.2f}" if ratio is not None else f"{'-':>{width}}"
        row += f"{r.difference:11.2e}"
        notes = ([] if r.agrees else ["OUTPUTS DISAGREE"]) + ([r.note] if r.note else [])
        lines.append(row + ("  " + "; ".join(notes) if notes else ""))
    if not report.threads_limited:
        limit = "one thread" if report.threads == 1 else f"{report.threads} threads"
        lines.append(f"note: BLAS may have used more than {limit}: "
                     "pip install threadpoolctl, or set "
                     + " ".join(f"{k}={v}" for k, v in thread_env(report.threads).items()) + " before starting Python")
    if report.plan:
        lines += ["plan (rnnloop numba):"] + ["  " + line for line in report.plan.splitlines()]
    if report.startup:
        s = report.startup
        lines.append(f"cold compile: {s.cold:.3f} s  load + first run, new process, empty RNNLOOP_CACHE_DIR")
        lines.append(f"warm load:    {s.warm:.3f} s  load + first run after import rnnloop, new process, same cache "
                     f"(import rnnloop {s.import_:.3f} s; whole process {s.process:.3f} s; median of {s.warm_runs})")
    elif report.startup_error:
        lines.append(f"cold compile / warm load: failed: {report.startup_error}")
    return "\n".join(lines)


def _threads_phrase(threads: int) -> str:
    if threads == 0:
        return "each engine on its default threads"
    return "one thread per engine" if threads == 1 else f"{threads} threads per engine"


def report_json(report: Report) -> str:
    """The report as JSON: the figures of the table in seconds (medians), ratios and differences; null where
    an engine did not run (`error` says why) or a figure does not apply."""
    ref, native_ref = report.seconds_of(report.reference), report.seconds_of(report.native_reference)
    engines = []
    for r in report.results:
        engines.append({
            "label": r.label, "median_s": r.seconds, "runs": r.runs, "load_and_first_run_s": r.first,
            "per_step_s": r.seconds / report.steps if r.seconds is not None and report.steps else None,
            "vs_onnxruntime": _ratio(r.seconds, ref), "vs_onnxruntime_native": _ratio(r.seconds, native_ref),
            "max_abs_diff": r.difference, "agrees": r.agrees, "error": r.error, "note": r.note})
    data = {"title": report.title, "steps": report.steps, "repeat": report.repeat, "warmup": report.warmup,
            "threads": report.threads, "threads_limited": report.threads_limited, "versions": report.versions,
            "reference": report.reference, "native_reference": report.native_reference, "engines": engines,
            "plan": report.plan.splitlines(), "startup": asdict(report.startup) if report.startup else None,
            "startup_error": report.startup_error}
    return json.dumps(_finite(data), indent=2, allow_nan=False)


def _finite(value: Any) -> Any:
    """`value` with every infinite or NaN float (a difference between outputs of other shapes) as None."""
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value
