"""rnnloop runs recurrent loops from ONNX models on the CPU."""

__version__ = "0.1.0"  # first: the code generator stamps it into kernel headers

from . import op
from .errors import (
                     BuildError,
                     FallbackWarning,
                     InputError,
                     ModelError,
                     OpError,
                     RnnloopError,
                     RunError,
                     UnsupportedModelError,
)
from .functional import Traced, cond, fori_loop, scan, trace, while_loop
from .network import Conditional, Loop, Network, Recurrence, Tensor
from .ort_compat import (ExecutionMode, GraphOptimizationLevel, InferenceSession, ModelMetadata, RunOptions,
                         SessionOptions, get_available_providers, get_device, set_default_logger_severity)
from .session import Session, ValueInfo, load

__all__ = ["load", "Session", "ValueInfo", "Network", "Loop", "Conditional", "Recurrence", "Tensor", "scan",
           "while_loop", "fori_loop", "cond", "trace", "Traced", "op", "RnnloopError", "ModelError", "BuildError",
           "UnsupportedModelError", "InputError", "OpError", "RunError", "FallbackWarning", "__version__",
           "InferenceSession", "SessionOptions", "RunOptions", "GraphOptimizationLevel", "ExecutionMode", "ModelMetadata",
           "get_available_providers", "get_device", "set_default_logger_severity"]
