"""onnxruntime's Python API over rnnloop: code written for onnxruntime runs with `import rnnloop as ort`.

`InferenceSession`, `SessionOptions`, `RunOptions`, `GraphOptimizationLevel`, `ExecutionMode`,
`get_available_providers`, `get_device` and `set_default_logger_severity` behave as onnxruntime's
(1.32) do. rnnloop runs on the CPU only; where an onnxruntime option has no meaning for rnnloop it is
accepted and documented here, and where accepting it would silently give the caller something other
than what it asked for (a GPU, a profile, an optimized model file, custom ops) it is an error:

- `providers`: "CPUExecutionProvider" (a name or a `(name, options)` tuple). onnxruntime warns
  about a provider it does not have and runs on the CPU instead, even for `["CUDAExecutionProvider"]`
  alone; rnnloop does the same (a UserWarning) when the list names the CPU as a fallback, as scripts
  written for a GPU do, and raises an error naming the providers when it does not, so that a
  request for a GPU alone never silently runs on the CPU. `providers=None` means the CPU.
- `SessionOptions.intra_op_num_threads` is the session's `threads` (0, the default: the cores this
  process may use, as onnxruntime's default; see rnnloop.load). `inter_op_num_threads` and
  `execution_mode=ORT_PARALLEL` have no effect: rnnloop runs ops one after another, as onnxruntime's
  sequential mode does.
- `graph_optimization_level`: accepted at every level; rnnloop's rewrites keep results exact and
  always run.
- `enable_cpu_mem_arena`, `enable_mem_pattern`, `enable_mem_reuse` (onnxruntime's allocator
  strategies), `use_deterministic_compute` (rnnloop is deterministic), `logid`, `log_verbosity_level`,
  `profile_file_prefix`: accepted, no effect.
- `log_severity_level` 3 (error) or 4 (fatal), on the options or through
  `set_default_logger_severity`, silences rnnloop's `FallbackWarning`s while the session loads.
- `enable_profiling=True` and `optimized_model_filepath` are errors when the session is created: the
  only product of either is a file (the profile `end_profiling()` names, the optimized model) that
  rnnloop does not write, and a caller that goes on to read it would fail far from the cause.
  `end_profiling()` returns "" as onnxruntime does when profiling is off.
- `register_custom_ops_library` is an error: rnnloop runs only the ops it implements.
- Session config entries: "rnnloop.backend" ("numba", the default, or "interp"), "rnnloop.strict"
  ("0"/"1") and "rnnloop.max_iterations" are read (as `rnnloop.load`'s keywords, which
  `InferenceSession` also takes); another "rnnloop." key is an error; onnxruntime's keys are stored
  without effect, except "session.load_model_format" = "ORT" and "session.set_denormal_as_zero" = "1",
  which would change what runs and are errors.
- `RunOptions.terminate` is checked when `run` starts (a running kernel cannot be interrupted);
  its other settings have no effect.
"""

from __future__ import annotations

import contextlib
import copy
import enum
import os
import re
import warnings
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from .errors import FallbackWarning, RnnloopError, RunError, UnsupportedModelError
from .plan import BACKENDS
from .session import Session, ValueInfo

CPU = "CPUExecutionProvider"


class GraphOptimizationLevel(enum.IntEnum):
    """onnxruntime's optimization levels; rnnloop accepts each and always applies its exact rewrites."""

    ORT_DISABLE_ALL = 0
    ORT_ENABLE_BASIC = 1
    ORT_ENABLE_EXTENDED = 2
    ORT_ENABLE_LAYOUT = 3
    ORT_ENABLE_ALL = 99


class ExecutionMode(enum.IntEnum):
    """onnxruntime's execution modes; rnnloop runs ops sequentially in either."""

    ORT_SEQUENTIAL = 0
    ORT_PARALLEL = 1


_default_severity = 2  # onnxruntime's default logger: warnings and worse


def get_available_providers() -> list[str]:
    """The execution providers rnnloop has: the CPU only."""
    return [CPU]


def get_device() -> str:
    """The device rnnloop runs on: "CPU"."""
    return "CPU"


def set_default_logger_severity(level: int) -> None:
    """Severity under which log messages are dropped, for sessions whose options leave it at -1:
    0 verbose, 1 info, 2 warning (the default), 3 error, 4 fatal. From 3 on, rnnloop's
    FallbackWarnings are silenced while a session loads."""
    global _default_severity
    _default_severity = _severity("level", level, allow_default=False)


# ---- option values: checked on assignment, as onnxruntime's typed setters do ----

def _count(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < 0:
        raise RnnloopError(f"{name} must be 0 (the default) or a positive count, got {value}")
    return value


def _severity(name: str, value: Any, allow_default: bool = True) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if not (-1 if allow_default else 0) <= value <= 4:
        raise RnnloopError(f"{name} must be 0 (verbose), 1 (info), 2 (warning), 3 (error) or 4 (fatal)"
                           f"{' or -1 (the default)' if allow_default else ''}, got {value}")
    return value


def _int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    return value


def _flag(name: str, value: Any) -> bool:
    if not isinstance(value, (bool, int)) or value not in (0, 1):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def _text(name: str, value: Any) -> str:
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"{name} must be a string, got {type(value).__name__}")
    return os.fspath(value)


def _member(kind: type[enum.IntEnum]):
    def convert(name: str, value: Any) -> enum.IntEnum:
        try:
            return kind(value)
        except (ValueError, TypeError):
            raise RnnloopError(f"{name} must be one of {', '.join(kind.__name__ + '.' + m for m in kind.__members__)}, "
                               f"got {value!r}") from None
    return convert


def _setting(name: str, default: Any, convert, doc: str) -> property:
    def get(self):
        return self._values.get(name, default)

    def set_(self, value):
        self._values[name] = convert(name, value)
    return property(get, set_, doc=doc)


class _Options:
    """Typed settings, string config entries, and a clear error for onnxruntime's features rnnloop
    lacks. Unknown attributes cannot be set (a misspelt option is an AttributeError, as in onnxruntime)."""

    __slots__ = ("_values", "_config")
    _kind = "options"
    _unsupported: frozenset[str] = frozenset()

    def __init__(self):
        self._values: dict[str, Any] = {}
        self._config: dict[str, str] = {}

    def __getattr__(self, name: str):
        if name in self._unsupported:
            raise AttributeError(f"{type(self).__name__}.{name} is an onnxruntime feature rnnloop does not "
                                 "support; remove it")
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self._unsupported:
            self.__getattr__(name)
        object.__setattr__(self, name, value)

    def __copy__(self):
        other = type(self)()
        other._values, other._config = dict(self._values), dict(self._config)
        return other

    def _add_entry(self, key: str, value: str) -> None:
        self._config[_text(f"the {self._kind} config key", key)] = _text(f"the value of {key!r}", value)

    def _get_entry(self, key: str) -> str:
        if key not in self._config:
            raise RnnloopError(f"{type(self).__name__} does not have configuration with key: {key}")
        return self._config[key]


class SessionOptions(_Options):
    """onnxruntime's SessionOptions; what each setting does in rnnloop is listed in the module's
    docstring (rnnloop.ort_compat)."""

    __slots__ = ()
    _kind = "session"
    _unsupported = frozenset({
        "add_external_initializers", "add_external_initializers_from_files_in_memory",
        "add_free_dimension_override_by_denotation", "add_free_dimension_override_by_name", "add_initializer",
        "add_provider", "add_provider_for_devices", "clear_ep_context_data_read_func", "execution_order",
        "has_providers", "set_ep_context_data_read_func", "set_load_cancellation_flag",
        "set_provider_selection_policy", "set_provider_selection_policy_delegate", "use_per_session_threads"})

    intra_op_num_threads = _setting("intra_op_num_threads", 0, _count,
                                    "Threads of one op (0: the default). Stored; not applied yet: rnnloop runs "
                                    "on one thread.")
    inter_op_num_threads = _setting("inter_op_num_threads", 0, _count,
                                    "Threads across ops; no effect (rnnloop runs ops sequentially).")
    graph_optimization_level = _setting("graph_optimization_level", GraphOptimizationLevel.ORT_ENABLE_ALL,
                                        _member(GraphOptimizationLevel),
                                        "Accepted at every level; rnnloop's exact rewrites always run.")
    execution_mode = _setting("execution_mode", ExecutionMode.ORT_SEQUENTIAL, _member(ExecutionMode),
                              "Accepted; rnnloop runs ops sequentially in either mode.")
    log_severity_level = _setting("log_severity_level", -1, _severity,
                                  "-1 (the default logger's), 0 verbose .. 4 fatal; 3 and 4 silence "
                                  "rnnloop's FallbackWarnings at load.")
    log_verbosity_level = _setting("log_verbosity_level", 0, _int, "Accepted; no effect.")
    logid = _setting("logid", "", _text, "Accepted; no effect.")
    enable_profiling = _setting("enable_profiling", False, _flag,
                                "True is an error when the session is created: rnnloop writes no profile.")
    profile_file_prefix = _setting("profile_file_prefix", "onnxruntime_profile_", _text, "Accepted; no effect.")
    optimized_model_filepath = _setting("optimized_model_filepath", "", _text,
                                        "A path is an error when the session is created: rnnloop writes no "
                                        "optimized model.")
    enable_cpu_mem_arena = _setting("enable_cpu_mem_arena", True, _flag, "Accepted; no effect.")
    enable_mem_pattern = _setting("enable_mem_pattern", True, _flag, "Accepted; no effect.")
    enable_mem_reuse = _setting("enable_mem_reuse", True, _flag, "Accepted; no effect.")
    use_deterministic_compute = _setting("use_deterministic_compute", False, _flag,
                                         "Accepted; rnnloop's results are deterministic anyway.")

    def add_session_config_entry(self, key: str, value: str) -> None:
        """Set a config entry: "rnnloop.backend", "rnnloop.strict", "rnnloop.max_iterations" are read;
        onnxruntime's keys are stored (see the module's docstring for the two that are errors)."""
        self._add_entry(key, value)

    def get_session_config_entry(self, key: str) -> str:
        """A config entry's value; an error when it was never set, as in onnxruntime."""
        return self._get_entry(key)

    def register_custom_ops_library(self, library_path: str) -> None:
        """An error: rnnloop runs only the ops it implements."""
        raise UnsupportedModelError(f"custom op libraries are not supported (register_custom_ops_library("
                                    f"{library_path!r})): rnnloop runs only the ops it implements; run a model "
                                    "with custom ops on onnxruntime")


class RunOptions(_Options):
    """onnxruntime's RunOptions: `terminate` is checked when a run starts; the rest has no effect."""

    __slots__ = ()
    _kind = "run"
    _unsupported = frozenset({"add_active_adapter"})

    log_severity_level = _setting("log_severity_level", -1, _severity, "Accepted; no effect.")
    log_verbosity_level = _setting("log_verbosity_level", 0, _int, "Accepted; no effect.")
    logid = _setting("logid", "", _text, "Accepted; no effect.")
    terminate = _setting("terminate", False, _flag,
                         "True makes run raise RunError before it starts; a running kernel is not interrupted.")
    only_execute_path_to_fetches = _setting("only_execute_path_to_fetches", False, _flag,
                                            "Accepted; no effect on the results.")

    def add_run_config_entry(self, key: str, value: str) -> None:
        """Store a config entry (none has an effect in rnnloop)."""
        self._add_entry(key, value)

    def get_run_config_entry(self, key: str) -> str:
        """A config entry's value; an error when it was never set."""
        return self._get_entry(key)


# ---- what a session is created with ----

_KEYWORDS = ("backend", "strict", "max_iterations", "base_dir")  # rnnloop.load's
_ORT_KEYWORDS = ("enable_fallback", "read_config_from_model", "disabled_optimizers")  # accepted, no effect
_RNNLOOP_KEYS = ("rnnloop.backend", "rnnloop.strict", "rnnloop.max_iterations")
_CHANGING_KEYS = {  # onnxruntime config entries whose non-default value would change what runs
    "session.load_model_format": ("ONNX", "rnnloop reads ONNX and OpenVINO IR models, not ORT format"),
    "session.set_denormal_as_zero": ("0", "rnnloop keeps denormals, so results would differ"),
}


def load_options(options: SessionOptions, keywords: dict[str, Any]) -> dict[str, Any]:
    """The keywords of Session (as rnnloop.load's) from the session options and InferenceSession's
    keywords; every option that cannot be honoured is listed in one error.
    """
    problems = []
    if options.enable_profiling:
        problems.append("enable_profiling=True: rnnloop writes no profile; leave it False (rnnloop bench and "
                        "Session.explain() show where the time goes)")
    if options.optimized_model_filepath:
        problems.append(f"optimized_model_filepath={options.optimized_model_filepath!r}: rnnloop writes no "
                        "optimized model (it compiles kernels into RNNLOOP_CACHE_DIR instead); leave it unset")
    config = options._config
    for key, value in config.items():
        if key.startswith("rnnloop.") and key not in _RNNLOOP_KEYS:
            problems.append(f"unknown config entry {key!r}; rnnloop reads {', '.join(_RNNLOOP_KEYS)}")
        elif key in _CHANGING_KEYS and value != _CHANGING_KEYS[key][0]:
            problems.append(f"config entry {key!r} = {value!r}: {_CHANGING_KEYS[key][1]}")
    result: dict[str, Any] = {}
    for name, key, parse in (("backend", "rnnloop.backend", str), ("strict", "rnnloop.strict", _parse_flag),
                             ("max_iterations", "rnnloop.max_iterations", int)):
        if key in config:
            try:
                result[name] = parse(config[key])
            except ValueError:
                problems.append(f"config entry {key!r} = {config[key]!r} is not {_WHAT[name]}")
                continue
        if name in keywords:
            if name in result and result[name] != keywords[name]:
                problems.append(f"{name}={keywords[name]!r} contradicts the config entry {key!r} = {config[key]!r}")
            result[name] = keywords[name]
    if options.intra_op_num_threads:  # (0: rnnloop's default, the cores available, as onnxruntime's)
        result["threads"] = options.intra_op_num_threads
    if result.get("backend", "numba") not in BACKENDS:
        problems.append(f"backend must be one of {BACKENDS}, got {result['backend']!r}")
    if problems:
        raise RnnloopError("these session options cannot be honoured by rnnloop:\n" +
                           "\n".join("  " + p for p in problems))
    return result


_WHAT = {"backend": "a backend", "strict": "'0' or '1'", "max_iterations": "an integer"}


def _parse_flag(text: str) -> bool:
    if text not in ("0", "1"):
        raise ValueError(text)
    return text == "1"


def _providers(providers: Any, provider_options: Any) -> dict[str, str]:
    """The CPU provider's options, after the checks onnxruntime makes; any other provider is an error."""
    if providers is None:
        if provider_options is not None:
            raise RnnloopError("provider_options is given without providers; pass providers=['CPUExecutionProvider']")
        return {}
    if isinstance(providers, str) or not isinstance(providers, Sequence):
        raise RnnloopError(f"providers must be a list, e.g. ['{CPU}'], got {providers!r}")
    if provider_options is not None:
        if isinstance(provider_options, dict) or not isinstance(provider_options, Sequence):
            raise RnnloopError("provider_options must be a list of dicts, one per provider")
        if len(providers) != len(provider_options):
            raise RnnloopError("'providers' and 'provider_options' should be the same length if both are given")
        if not all(isinstance(p, str) for p in providers):
            raise RnnloopError("only provider names are allowed in 'providers' when 'provider_options' is given")
        if not all(isinstance(o, dict) for o in provider_options):
            raise RnnloopError("'provider_options' values must be dicts")
        pairs = list(zip(providers, provider_options))
    else:
        pairs = []
        for p in providers:
            if isinstance(p, str):
                pairs.append((p, {}))
            elif isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], str) and isinstance(p[1], dict):
                pairs.append(p)
            else:
                raise RnnloopError(f"'providers' values must be either strings or (string, dict) tuples, got {p!r}")
    others = [name for name, _ in pairs if name != CPU]
    if others and all(name != CPU for name, _ in pairs):
        raise RnnloopError(f"rnnloop runs on the CPU only; it has no {', '.join(map(repr, others))} (onnxruntime "
                           f"would warn and run on the CPU; rnnloop refuses, so that a request for another device "
                           f"never runs on the CPU unnoticed). Pass providers=['{CPU}'] or "
                           "rnnloop.get_available_providers()")
    if others:  # the CPU listed as the fallback, as scripts written for a GPU do: run there, and say so
        warnings.warn(f"rnnloop runs on the CPU only: {', '.join(map(repr, others))} are not available, "
                      f"running on {CPU}", UserWarning, stacklevel=4)
    pairs = [(name, options) for name, options in pairs if name == CPU]
    if not pairs:
        return {}
    return {str(k): str(v) for k, v in pairs[0][1].items()}


@contextlib.contextmanager
def _quiet(severity: int):
    """Silence rnnloop's FallbackWarnings when the log severity asks for errors only."""
    with warnings.catch_warnings():
        if (severity if severity >= 0 else _default_severity) >= 3:
            warnings.simplefilter("ignore", FallbackWarning)
        yield


# ---- metadata ----

@dataclass(frozen=True)
class ModelMetadata:
    """onnxruntime's ModelMetadata: from an ONNX model's header, or what an OpenVINO IR file says
    (producer "OpenVINO", its net name, and its rt_info entries as custom metadata)."""

    producer_name: str = ""
    graph_name: str = ""
    domain: str = ""
    description: str = ""
    graph_description: str = ""
    version: int = 0
    custom_metadata_map: dict[str, str] = field(default_factory=dict)


def _onnx_metadata(proto) -> ModelMetadata:
    return ModelMetadata(proto.producer_name, proto.graph.name, proto.domain, proto.doc_string,
                         proto.graph.doc_string, proto.model_version,
                         {p.key: p.value for p in proto.metadata_props})


def _ir_metadata(path: str) -> ModelMetadata:
    root = ET.parse(path).getroot()  # (rnnloop's reader has just parsed the same file)
    entries: dict[str, str] = {}

    def walk(element, prefix: str) -> None:
        for child in element:
            key = prefix + (child.get("name", "") if child.tag == "info" else child.tag)
            if child.get("value") is not None:
                entries[key] = child.get("value")
            walk(child, key + ".")
    rt_info = root.find("rt_info")
    if rt_info is not None:
        walk(rt_info, "")
    return ModelMetadata(producer_name="OpenVINO", graph_name=root.get("name", ""), custom_metadata_map=entries)


def _declared_dim_names(proto) -> set[str]:
    """The symbolic dimensions the model itself names (not those ONNX shape inference makes up)."""
    names = set()
    for info in [*proto.graph.input, *proto.graph.output, *proto.graph.value_info]:
        if info.type.HasField("tensor_type"):
            names.update(d.dim_param for d in info.type.tensor_type.shape.dim if d.dim_param)
    return names


def _node_arg(info: ValueInfo, declared: set[str] | None) -> ValueInfo:
    """As onnxruntime shows it: a dimension ONNX's inference named "unk__N" is unknown (None)."""
    if declared is None or info.shape is None:
        return info
    shape = [None if isinstance(d, str) and re.fullmatch(r"unk__\d+", d) and d not in declared else d
             for d in info.shape]
    return replace(info, shape=shape)


# ---- the session ----

_UNSUPPORTED_METHODS = frozenset({
    "io_binding", "run_with_iobinding", "run_with_ort_values", "run_with_ortvaluevector", "run_async",
    "create_ortvalue_from_shape_and_type", "get_input_memory_infos", "get_output_memory_infos",
    "get_input_epdevices", "get_provider_graph_assignment_info", "get_tuning_results", "set_tuning_results",
    "set_ep_dynamic_options", "release_captured_graph"})


class InferenceSession:
    """onnxruntime's InferenceSession, running the model with rnnloop.

    `path_or_bytes`: an ONNX model (path, bytes or onnx.ModelProto) or the path of an OpenVINO IR
    .xml, as rnnloop.load takes. Besides onnxruntime's keywords (`enable_fallback`,
    `read_config_from_model`, `disabled_optimizers`: accepted, no effect), it takes rnnloop.load's
    `backend` ("numba" by default, or "interp"; also the config entry "rnnloop.backend"), `strict`,
    `max_iterations` and `base_dir`. The rnnloop Session is `.session` (explain(), kernel_sources()).
    What each option does is in the docstring of rnnloop.ort_compat.
    """

    def __init__(self, path_or_bytes: Any, sess_options: SessionOptions | None = None,
                 providers: Sequence[str | tuple[str, dict]] | None = None,
                 provider_options: Sequence[dict] | None = None, **kwargs: Any):
        unknown = sorted(set(kwargs) - set(_KEYWORDS) - set(_ORT_KEYWORDS))
        if unknown:
            raise TypeError(f"InferenceSession got unexpected keyword argument(s) {unknown}; rnnloop takes "
                            f"{', '.join(_KEYWORDS)} (and onnxruntime's {', '.join(_ORT_KEYWORDS)})")
        if sess_options is None:
            sess_options = SessionOptions()
        elif not isinstance(sess_options, SessionOptions):
            raise TypeError(f"sess_options must be an rnnloop.SessionOptions, got {type(sess_options).__name__}")
        self._options = copy.copy(sess_options)  # later changes to the caller's options do not apply
        self._provider_options = _providers(providers, provider_options)
        options = load_options(self._options, {k: kwargs[k] for k in ("backend", "strict", "max_iterations")
                                               if k in kwargs})
        model, declared = path_or_bytes, None
        with _quiet(self._options.log_severity_level):
            if isinstance(model, (str, os.PathLike)) and os.fspath(model).lower().endswith(".xml"):
                from .frontends.openvino import load_ir
                graph = load_ir(os.fspath(model))
                self._meta = _ir_metadata(os.fspath(model))
            else:
                from .frontends.onnx import convert_model, read_model
                proto = read_model(model, kwargs.get("base_dir"))
                self._meta, declared = _onnx_metadata(proto), _declared_dim_names(proto)
                graph = convert_model(proto)
            self.session = Session(graph, **options)
        self._inputs = [_node_arg(i, declared) for i in self.session.get_inputs()]
        self._outputs = [_node_arg(o, declared) for o in self.session.get_outputs()]

    def __getattr__(self, name: str):
        if name in _UNSUPPORTED_METHODS:
            raise AttributeError(f"InferenceSession.{name} is an onnxruntime feature rnnloop does not support; "
                                 "use run(output_names, input_feed) with NumPy arrays")
        raise AttributeError(f"'InferenceSession' object has no attribute '{name}'")

    def run(self, output_names: Sequence[str] | None, input_feed: dict[str, Any],
            run_options: RunOptions | None = None) -> list[Any]:
        """The named outputs (every output when `output_names` is None or empty, as in onnxruntime)."""
        if run_options is not None:
            if not isinstance(run_options, RunOptions):
                raise TypeError(f"run_options must be an rnnloop.RunOptions, got {type(run_options).__name__}")
            if run_options.terminate:
                raise RunError("the run was not started: run_options.terminate is True")
        if output_names is not None and not isinstance(output_names, str) and len(output_names) == 0:
            output_names = None
        return self.session.run(output_names, input_feed)

    def get_inputs(self) -> list[ValueInfo]:
        """The model's inputs: name, shape (ints, names of symbolic dimensions, None) and type."""
        return list(self._inputs)

    def get_outputs(self) -> list[ValueInfo]:
        """The model's outputs: name, shape and type."""
        return list(self._outputs)

    def get_overridable_initializers(self) -> list[ValueInfo]:
        """None: rnnloop folds every initializer into the model, including those listed as inputs."""
        return []

    def get_modelmeta(self) -> ModelMetadata:
        """The model's metadata (see ModelMetadata)."""
        return self._meta

    def get_providers(self) -> list[str]:
        return [CPU]

    def get_provider_options(self) -> dict[str, dict[str, str]]:
        """{"CPUExecutionProvider": the options given with it, as strings}."""
        return {CPU: dict(self._provider_options)}

    def set_providers(self, providers: Sequence[Any] | None = None,
                      provider_options: Sequence[dict] | None = None) -> None:
        """Checked as at creation: the CPU provider only."""
        self._provider_options = _providers(providers, provider_options)

    def get_session_options(self) -> SessionOptions:
        """The options the session was created with."""
        return self._options

    def end_profiling(self) -> str:
        """"": profiling is never on in rnnloop (enable_profiling=True is an error)."""
        return ""

    def get_profiling_start_time_ns(self) -> int:
        return 0

    def disable_fallback(self) -> None:
        """Accepted; no effect (onnxruntime's fallback retries on the CPU, where rnnloop already runs)."""

    def enable_fallback(self) -> None:
        """Accepted; no effect."""
