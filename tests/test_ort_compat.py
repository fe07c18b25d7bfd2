"""rnnloop as a drop-in for onnxruntime: the same script runs with either imported as `ort`, and every
onnxruntime option is either honoured, accepted without effect as documented, or a clear error."""

from __future__ import annotations

import pathlib
import re
import warnings

import numpy as np
import onnx
import pytest
from helpers import parse

import rnnloop
from rnnloop import ort_compat

ort = pytest.importorskip("onnxruntime")

DATA = pathlib.Path(__file__).parent / "data"
CPU = "CPUExecutionProvider"

# A recurrence as an ONNX Loop over a batch of any size: h = tanh(0.5 h + x), `steps` times, every h kept.
LOOP = """
recurrence (float[N, 4] x, int64 steps) => (float[N, 4] h, float[T, N, 4] hs) {
    go = Constant <value = bool {1}> ()
    h, hs = Loop(steps, go, x) <body = step (int64 i, bool c, float[N, 4] h_in) => (bool c_out, float[N, 4] h_out,
                                                                                    float[N, 4] h_scan) {
        half = Constant <value = float {0.5}> ()
        scaled = Mul(h_in, half)
        pre = Add(scaled, x)
        h_out = Tanh(pre)
        h_scan = Identity(h_out)
        c_out = Identity(c)
    }>
}
"""

# Written for onnxruntime; the test runs it as it is and with only its import line replaced.
SCRIPT = """
import numpy as np
import onnxruntime as ort

options = ort.SessionOptions()
options.intra_op_num_threads = 1
options.inter_op_num_threads = 1
options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
options.log_severity_level = 3
session = ort.InferenceSession(MODEL_PATH, options, providers=["CPUExecutionProvider"])

first = session.get_inputs()[0]
x = np.linspace(-1, 1, 3 * first.shape[1], dtype=np.float32).reshape(3, first.shape[1])
feeds = {first.name: x, session.get_inputs()[1].name: np.array(5, np.int64)}
everything = session.run(None, feeds)
run_options = ort.RunOptions()
run_options.log_severity_level = 3
only = session.run([session.get_outputs()[1].name], feeds, run_options)
meta = session.get_modelmeta()

result = {
    "inputs": [(i.name, i.shape, i.type) for i in session.get_inputs()],
    "outputs": [(o.name, o.shape, o.type) for o in session.get_outputs()],
    "everything": everything,
    "only": only,
    "meta": (meta.producer_name, meta.graph_name, meta.domain, meta.description, meta.version,
             meta.custom_metadata_map),
    "providers": session.get_providers(),
    "cpu_available": "CPUExecutionProvider" in ort.get_available_providers(),
    "device": ort.get_device(),
}
"""


def _loop_model() -> onnx.ModelProto:
    model = parse(LOOP)
    model.producer_name, model.domain, model.doc_string, model.model_version = "a test", "org.test", "h = tanh", 3
    onnx.helper.set_model_props(model, {"author": "rnnloop tests"})
    return model


@pytest.fixture(scope="module")
def loop_path(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("ort") / "recurrence.onnx"
    onnx.save(_loop_model(), path)
    return str(path)


SMALL = parse("""
small (float[N, 3] x, float[?, 2] u) => (float[N, 3] y, float[?, 2] w) {
    y = Relu(x)
    w = Neg(u)
}
""")
SMALL_FEEDS = {"x": np.array([[-1, 0, 2]], np.float32), "u": np.ones((2, 2), np.float32)}


def _session(model=SMALL, options=None, **keywords) -> rnnloop.InferenceSession:
    keywords.setdefault("backend", "interp")
    return rnnloop.InferenceSession(model.SerializeToString(), options, **keywords)


def _run_script(module: str, path: str) -> dict:
    """The script's namespace after it ran with `module` imported as ort."""
    source = SCRIPT.replace("import onnxruntime as ort", f"import {module} as ort")
    assert source.count(f"import {module} as ort") == 1
    namespace = {"MODEL_PATH": path}
    exec(compile(source, f"<script with {module}>", "exec"), namespace)
    return namespace


def test_an_onnxruntime_script_runs_unchanged_with_rnnloop_imported_as_ort(loop_path):
    # (the default backend, numba: the loop is one compiled kernel)
    expected, ran = _run_script("onnxruntime", loop_path)["result"], _run_script("rnnloop", loop_path)
    actual = ran["result"]
    assert ran["session"].session.partition.whole() is not None  # one kernel (a fallback would be silenced)
    for key in ("inputs", "outputs", "meta", "providers", "cpu_available", "device"):
        assert actual[key] == expected[key], key
    for key in ("everything", "only"):
        assert len(actual[key]) == len(expected[key])
        for a, e in zip(actual[key], expected[key]):
            assert a.dtype == e.dtype and a.shape == e.shape
            np.testing.assert_allclose(a, e, rtol=1e-6, atol=1e-6)


# ---- SessionOptions ----

SETTINGS = ("intra_op_num_threads", "inter_op_num_threads", "graph_optimization_level", "execution_mode",
            "log_severity_level", "log_verbosity_level", "logid", "enable_profiling", "profile_file_prefix",
            "optimized_model_filepath", "enable_cpu_mem_arena", "enable_mem_pattern", "enable_mem_reuse",
            "use_deterministic_compute")


@pytest.mark.parametrize("name", SETTINGS)
def test_session_options_start_with_onnxruntimes_defaults(name):
    ours, theirs = getattr(rnnloop.SessionOptions(), name), getattr(ort.SessionOptions(), name)
    if hasattr(theirs, "name"):  # an enum
        assert (ours.name, int(ours)) == (theirs.name, int(theirs))
    else:
        assert ours == theirs and type(ours) is type(theirs)


def test_run_options_start_with_onnxruntimes_defaults():
    for name in ("log_severity_level", "log_verbosity_level", "logid", "terminate", "only_execute_path_to_fetches"):
        assert getattr(rnnloop.RunOptions(), name) == getattr(ort.RunOptions(), name), name


@pytest.mark.parametrize("kind", ["GraphOptimizationLevel", "ExecutionMode"])
def test_enums_have_onnxruntimes_members_and_values(kind):
    assert {m: int(v) for m, v in getattr(rnnloop, kind).__members__.items()} == \
           {m: int(v) for m, v in getattr(ort, kind).__members__.items()}


def test_the_features_called_unsupported_are_onnxruntimes():
    assert ort_compat.SessionOptions._unsupported <= set(dir(ort.SessionOptions()))
    assert ort_compat.RunOptions._unsupported <= set(dir(ort.RunOptions()))
    assert ort_compat._UNSUPPORTED_METHODS <= set(dir(ort.InferenceSession))


@pytest.mark.parametrize("name, value, error, match", [
    ("intra_op_num_threads", "2", TypeError, "must be an int"),
    ("intra_op_num_threads", -1, rnnloop.RnnloopError, "positive count"),
    ("inter_op_num_threads", 1.5, TypeError, "must be an int"),
    ("graph_optimization_level", 7, rnnloop.RnnloopError, "GraphOptimizationLevel.ORT_ENABLE_ALL"),
    ("execution_mode", "parallel", rnnloop.RnnloopError, "ExecutionMode.ORT_PARALLEL"),
    ("log_severity_level", 5, rnnloop.RnnloopError, "4 .fatal."),
    ("enable_mem_pattern", "yes", TypeError, "True or False"),
    ("optimized_model_filepath", 3, TypeError, "must be a string"),
])
def test_a_session_option_of_the_wrong_type_or_value_is_refused_on_assignment(name, value, error, match):
    options = rnnloop.SessionOptions()
    with pytest.raises(error, match=match):
        setattr(options, name, value)


def test_a_misspelt_option_is_an_attribute_error_as_in_onnxruntime():
    with pytest.raises(AttributeError, match="no attribute 'intra_op_threads'"):
        rnnloop.SessionOptions().intra_op_threads = 2
    with pytest.raises(AttributeError, match="no attribute 'terminated'"):
        rnnloop.RunOptions().terminated = True


def test_an_onnxruntime_feature_rnnloop_lacks_is_named_as_such():
    with pytest.raises(AttributeError, match="add_free_dimension_override_by_name is an onnxruntime feature rnnloop"):
        rnnloop.SessionOptions().add_free_dimension_override_by_name("N", 1)
    with pytest.raises(AttributeError, match="execution_order is an onnxruntime feature rnnloop"):
        rnnloop.SessionOptions().execution_order = 0
    with pytest.raises(AttributeError, match="io_binding is an onnxruntime feature rnnloop"):
        _session().io_binding()
    assert not hasattr(_session(), "run_with_ort_values")


def test_thread_counts_are_the_sessions_and_it_keeps_its_own_copy_of_the_options():
    options = rnnloop.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = 3, 2
    session = _session(options=options)
    options.intra_op_num_threads = 1  # after creation: not the session's
    kept = session.get_session_options()
    assert (kept.intra_op_num_threads, kept.inter_op_num_threads) == (3, 2)
    assert session.session.threads == 3  # (intra_op_num_threads is rnnloop's threads)
    assert _session().session.threads == rnnloop.threads.resolve(None)  # (0, the default: rnnloop's default)


@pytest.mark.parametrize("level", list(rnnloop.GraphOptimizationLevel))
@pytest.mark.parametrize("mode", list(rnnloop.ExecutionMode))
def test_every_optimization_level_and_execution_mode_gives_the_same_results(level, mode):
    options = rnnloop.SessionOptions()
    options.graph_optimization_level, options.execution_mode = level, mode
    y, w = _session(options=options).run(None, SMALL_FEEDS)
    np.testing.assert_array_equal(y, [[0, 0, 2]])
    np.testing.assert_array_equal(w, -SMALL_FEEDS["u"])


def test_memory_and_logging_options_are_accepted():
    options = rnnloop.SessionOptions()
    options.enable_cpu_mem_arena = options.enable_mem_pattern = options.enable_mem_reuse = False
    options.use_deterministic_compute = True
    options.log_severity_level, options.log_verbosity_level, options.logid = 0, 1, "mine"
    assert len(_session(options=options).run(None, SMALL_FEEDS)) == 2


def test_profiling_and_an_optimized_model_file_are_errors_listed_together():
    options = rnnloop.SessionOptions()
    options.enable_profiling = True
    options.optimized_model_filepath = "optimized.onnx"
    with pytest.raises(rnnloop.RnnloopError, match=r"(?s)enable_profiling=True: rnnloop writes no profile.*"
                                                   r"optimized_model_filepath='optimized.onnx': rnnloop writes no"):
        _session(options=options)
    assert _session().end_profiling() == ""  # as onnxruntime's when profiling is off
    assert _session().get_profiling_start_time_ns() == 0


def test_a_custom_ops_library_is_an_error():
    with pytest.raises(rnnloop.UnsupportedModelError, match="custom op libraries are not supported"):
        rnnloop.SessionOptions().register_custom_ops_library("libcustom.so")


# ---- config entries and rnnloop's own keywords ----

def test_config_entries_read_back_and_a_missing_one_is_an_error():
    options = rnnloop.SessionOptions()
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    with pytest.raises(rnnloop.RnnloopError, match="does not have configuration with key: nothing"):
        options.get_session_config_entry("nothing")
    assert len(_session(options=options).run(None, SMALL_FEEDS)) == 2  # onnxruntime's keys have no effect


@pytest.mark.parametrize("entry, keywords, backend", [
    (None, {}, "numba"),
    ("interp", {}, "interp"),
    (None, {"backend": "interp"}, "interp"),
    ("interp", {"backend": "interp"}, "interp"),
])
def test_the_backend_comes_from_a_config_entry_or_a_keyword_and_is_numba_by_default(entry, keywords, backend,
                                                                                    monkeypatch):
    monkeypatch.setattr(ort_compat, "Session", _Recorder)  # (what Session is given, without compiling)
    options = rnnloop.SessionOptions()
    if entry:
        options.add_session_config_entry("rnnloop.backend", entry)
    session = rnnloop.InferenceSession(SMALL, options, **keywords)
    assert session.session.options.get("backend", "numba") == backend


class _Recorder:
    """A stand-in for Session that keeps the keywords it is given."""

    def __init__(self, graph, **options):
        self.options = options

    def get_inputs(self):
        return []

    get_outputs = get_inputs


@pytest.mark.parametrize("entries, keywords, match", [
    ({"rnnloop.backend": "llvm"}, {}, r"backend must be one of \('numba', 'interp'\), got 'llvm'"),
    ({"rnnloop.backend": "interp"}, {"backend": "numba"}, "backend='numba' contradicts the config entry"),
    ({"rnnloop.threads": "2"}, {}, "unknown config entry 'rnnloop.threads'"),
    ({"rnnloop.strict": "yes"}, {}, "'rnnloop.strict' = 'yes' is not '0' or '1'"),
    ({"rnnloop.max_iterations": "many"}, {}, "'rnnloop.max_iterations' = 'many' is not an integer"),
    ({"session.load_model_format": "ORT"}, {}, "not ORT format"),
    ({"session.set_denormal_as_zero": "1"}, {}, "rnnloop keeps denormals"),
])
def test_a_config_entry_rnnloop_cannot_honour_is_an_error(entries, keywords, match):
    options = rnnloop.SessionOptions()
    for key, value in entries.items():
        options.add_session_config_entry(key, value)
    with pytest.raises(rnnloop.RnnloopError, match=match):
        rnnloop.InferenceSession(SMALL, options, **keywords)


def test_max_iterations_from_a_config_entry_stops_a_long_loop():
    options = rnnloop.SessionOptions()
    options.add_session_config_entry("rnnloop.max_iterations", "3")
    session = _session(_loop_model(), options)
    x = np.zeros((1, 4), np.float32)
    assert session.run(["h"], {"x": x, "steps": np.array(3, np.int64)})[0].shape == (1, 4)
    with pytest.raises(rnnloop.RunError, match="max_iterations"):
        session.run(None, {"x": x, "steps": np.array(4, np.int64)})


def test_unknown_keywords_are_refused_and_onnxruntimes_own_accepted():
    with pytest.raises(TypeError, match=r"unexpected keyword argument\(s\) \['backed'\]"):
        rnnloop.InferenceSession(SMALL, backed="interp")
    session = _session(enable_fallback=0, read_config_from_model=0, disabled_optimizers=["ConstantFolding"])
    assert len(session.run(None, SMALL_FEEDS)) == 2


def test_options_of_another_kind_are_refused():
    with pytest.raises(TypeError, match="sess_options must be an rnnloop.SessionOptions"):
        _session(options=ort.SessionOptions())
    with pytest.raises(TypeError, match="run_options must be an rnnloop.RunOptions"):
        _session().run(None, SMALL_FEEDS, ort.RunOptions())


# ---- providers ----

@pytest.mark.parametrize("providers, provider_options, shown", [
    (None, None, {}),
    ([CPU], None, {}),
    ((CPU,), None, {}),
    ([(CPU, {"use_arena": 0})], None, {"use_arena": "0"}),
    ([CPU], [{"use_arena": "1"}], {"use_arena": "1"}),
    (rnnloop.get_available_providers(), None, {}),
])
def test_the_cpu_provider_is_accepted_with_its_options(providers, provider_options, shown):
    session = _session(providers=providers, provider_options=provider_options)
    assert session.get_providers() == [CPU]
    assert session.get_provider_options() == {CPU: shown}


@pytest.mark.parametrize("providers", [
    ["CUDAExecutionProvider", CPU],
    [("TensorrtExecutionProvider", {"device_id": 0}), (CPU, {"use_arena": 0})],
])
def test_other_providers_before_the_cpu_fallback_warn_and_run_on_the_cpu(providers):
    with pytest.warns(UserWarning, match="CPU only: '(CUDA|Tensorrt)ExecutionProvider' .* not available"):
        session = _session(providers=providers)
    assert session.get_providers() == [CPU]


@pytest.mark.parametrize("providers", [
    ["CUDAExecutionProvider"],
    [("TensorrtExecutionProvider", {"device_id": 0})],
    ["AzureExecutionProvider", "CUDAExecutionProvider"],
])
def test_other_providers_without_the_cpu_are_an_error_naming_them(providers):
    others = [p[0] if isinstance(p, tuple) else p for p in providers if p != CPU]
    with pytest.raises(rnnloop.RnnloopError, match=f"CPU only; it has no '{others[0]}'.*providers=\\['{CPU}'\\]"):
        _session(providers=providers)
    with pytest.raises(rnnloop.RnnloopError, match="CPU only"):
        _session().set_providers(providers)


def test_onnxruntime_runs_on_the_cpu_when_asked_for_a_provider_it_lacks():
    # What rnnloop refuses to do: onnxruntime only warns (rnnloop's choice is in ort_compat's docstring).
    if "CUDAExecutionProvider" in ort.get_available_providers():
        pytest.skip("this onnxruntime has CUDA")
    with pytest.warns(UserWarning, match="CUDAExecutionProvider"):
        session = ort.InferenceSession(SMALL.SerializeToString(), providers=["CUDAExecutionProvider"])
    assert session.get_providers() == [CPU]


@pytest.mark.parametrize("providers, provider_options, match", [
    (CPU, None, "providers must be a list"),
    ([CPU], [{}, {}], "should be the same length"),
    ([(CPU, {})], [{}], "only provider names are allowed"),
    ([CPU], ["use_arena=0"], "values must be dicts"),
    ([CPU], {"use_arena": "0"}, "a list of dicts"),
    (None, [{}], "provider_options is given without providers"),
    ([(CPU,)], None, r"strings or \(string, dict\) tuples"),
])
def test_malformed_providers_are_errors(providers, provider_options, match):
    with pytest.raises(rnnloop.RnnloopError, match=match):
        _session(providers=providers, provider_options=provider_options)


def test_module_functions_describe_the_cpu():
    assert rnnloop.get_available_providers() == [CPU]
    assert rnnloop.get_device() == "CPU" == ort.get_device()


# ---- running ----

def test_run_takes_none_or_an_empty_list_for_every_output_and_a_tuple_of_names():
    session = _session()
    everything = session.run(None, SMALL_FEEDS)
    for names in ([], ()):
        for a, e in zip(session.run(names, SMALL_FEEDS), everything):
            np.testing.assert_array_equal(a, e)
    (w,) = session.run(("w",), SMALL_FEEDS, rnnloop.RunOptions())
    np.testing.assert_array_equal(w, everything[1])


def test_run_options_terminate_stops_a_run_before_it_starts():
    run_options = rnnloop.RunOptions()
    run_options.terminate = True
    with pytest.raises(rnnloop.RunError, match="run_options.terminate is True"):
        _session().run(None, SMALL_FEEDS, run_options)


def test_run_options_settings_and_config_entries_are_accepted():
    run_options = rnnloop.RunOptions()
    run_options.log_severity_level, run_options.log_verbosity_level, run_options.logid = 0, 2, "run"
    run_options.only_execute_path_to_fetches = True
    run_options.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
    assert run_options.get_run_config_entry("memory.enable_memory_arena_shrinkage") == "cpu:0"
    with pytest.raises(rnnloop.RnnloopError, match="does not have configuration with key: other"):
        run_options.get_run_config_entry("other")
    assert len(_session().run(None, SMALL_FEEDS, run_options)) == 2


def test_session_methods_without_meaning_for_rnnloop_are_accepted():
    session = _session()
    session.disable_fallback()
    session.enable_fallback()
    assert session.get_overridable_initializers() == []
    assert isinstance(session.session, rnnloop.Session)  # explain(), kernel_sources()


# ---- what the session reports ----

def test_inputs_and_outputs_are_described_as_onnxruntime_does():
    model = parse("""
    described (float[N, 3] x, float[?, 2] u, int64 k) => (float[N, 3] y, float[?, 2] w, int64 m) {
        y = Relu(x)
        w = Neg(u)
        m = Neg(k)
        t = Concat <axis = 0> (x, x)
        v = Shape(t)
    }
    """)  # t and v: outputs without a declared shape, which ONNX's inference names unk__0 and ort None
    model.graph.output.extend([onnx.helper.make_tensor_value_info("t", onnx.TensorProto.FLOAT, None),
                               onnx.helper.make_tensor_value_info("v", onnx.TensorProto.INT64, None)])
    theirs = ort.InferenceSession(model.SerializeToString(), providers=[CPU])
    ours = _session(model)
    for get in ("get_inputs", "get_outputs"):
        assert [(a.name, a.shape, a.type) for a in getattr(ours, get)()] == \
               [(a.name, a.shape, a.type) for a in getattr(theirs, get)()]


def test_model_metadata_is_onnxruntimes():
    model = _loop_model()
    model.graph.doc_string = "the graph"
    ours = _session(model).get_modelmeta()
    theirs = ort.InferenceSession(model.SerializeToString(), providers=[CPU]).get_modelmeta()
    for name in ("producer_name", "graph_name", "domain", "description", "graph_description", "version",
                 "custom_metadata_map"):
        assert getattr(ours, name) == getattr(theirs, name), name


def test_a_model_is_read_from_a_path_bytes_or_a_model_proto(tmp_path):
    path = tmp_path / "small.onnx"
    onnx.save(SMALL, path)
    expected = rnnloop.load(SMALL, backend="interp").run(None, SMALL_FEEDS)
    for model in (str(path), path, SMALL.SerializeToString(), SMALL):
        session = rnnloop.InferenceSession(model, backend="interp")
        for a, e in zip(session.run(None, SMALL_FEEDS), expected):
            np.testing.assert_array_equal(a, e)


def test_an_openvino_ir_file_runs_and_describes_itself():
    path = str(DATA / "ti_reverse_rnn.xml")
    session = rnnloop.InferenceSession(path, providers=[CPU], backend="interp")
    reference = rnnloop.load(path, backend="interp")
    feeds = {i.name: np.random.default_rng(0).standard_normal([d or 2 for d in i.shape]).astype(np.float32)
             for i in reference.get_inputs()}
    for a, e in zip(session.run(None, feeds), reference.run(None, feeds)):
        np.testing.assert_array_equal(a, e)
    assert session.get_inputs() == reference.get_inputs()
    meta = session.get_modelmeta()
    assert (meta.producer_name, meta.graph_name, meta.version, meta.custom_metadata_map) == \
           ("OpenVINO", "ti_reverse_rnn", 0, {})


def test_an_openvino_ir_files_rt_info_is_its_custom_metadata(tmp_path):
    ov = pytest.importorskip("openvino")
    import openvino.opset13 as ops
    x = ops.parameter([2, 3], np.float32, name="x")
    model = ov.Model([ops.relu(x)], [x], "relu_net")
    model.set_rt_info("v1", ["custom", "k"])
    ov.save_model(model, tmp_path / "relu.xml", compress_to_fp16=False)
    meta = rnnloop.InferenceSession(str(tmp_path / "relu.xml"), backend="interp").get_modelmeta()
    assert meta.graph_name == "relu_net"
    assert meta.custom_metadata_map["custom.k"] == "v1"
    assert meta.custom_metadata_map["OpenVINO Runtime"] == ov.get_version()


# ---- logging ----

def _warning_session(monkeypatch):
    """Session creation that warns as a region failing to compile does."""
    real = ort_compat.Session

    def warning(graph, **options):
        warnings.warn("a region is interpreted", rnnloop.FallbackWarning)
        return real(graph, **options)
    monkeypatch.setattr(ort_compat, "Session", warning)


@pytest.mark.parametrize("severity, default, silent", [
    (-1, 2, False), (2, 2, False), (3, 2, True), (4, 2, True), (-1, 3, True), (2, 3, False),
])
def test_an_error_log_severity_silences_fallback_warnings(severity, default, silent, monkeypatch):
    _warning_session(monkeypatch)
    monkeypatch.setattr(ort_compat, "_default_severity", 2)
    rnnloop.set_default_logger_severity(default)
    options = rnnloop.SessionOptions()
    options.log_severity_level = severity
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _session(options=options)
    assert [str(w.message) for w in caught if w.category is rnnloop.FallbackWarning] == \
           ([] if silent else ["a region is interpreted"])


def test_the_default_logger_severity_is_checked():
    with pytest.raises(rnnloop.RnnloopError, match="4 .fatal."):
        rnnloop.set_default_logger_severity(-1)


def test_the_readme_example_runs(tmp_path, monkeypatch):
    readme = (pathlib.Path(__file__).parent.parent / "README.md").read_text()
    section = readme[readme.index("## Drop-in for onnxruntime\n"):readme.index("## OpenVINO IR\n")]
    (block,) = re.findall(r"```python\n(.*?)```", section, re.DOTALL)
    monkeypatch.chdir(tmp_path)
    onnx.save(parse("tanh (float[N, 4] x) => (float[N, 4] y) { y = Tanh(x) }"), "model.onnx")
    namespace = {"x": np.ones((2, 4), np.float32)}
    exec(compile(block, "README.md", "exec"), namespace)  # noqa: S102  (our own README)
    np.testing.assert_allclose(namespace["outputs"][0], np.tanh(namespace["x"]), rtol=1e-6)
