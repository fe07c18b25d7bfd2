"""rnnloop runs recurrent loops from ONNX models on the CPU."""

from .errors import (
                     FallbackWarning,
                     InputError,
                     ModelError,
                     OpError,
                     RnnloopError,
                     RunError,
                     UnsupportedModelError,
)
from .session import Session, ValueInfo, load

__version__ = "0.1.0"

__all__ = ["load", "Session", "ValueInfo", "RnnloopError", "ModelError", "UnsupportedModelError", "InputError",
           "OpError", "RunError", "FallbackWarning", "__version__"]
