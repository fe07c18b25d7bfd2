"""rnnloop runs recurrent loops from ONNX models on the CPU."""

__version__ = "0.1.0"  # first: the code generator stamps it into kernel headers

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

__all__ = ["load", "Session", "ValueInfo", "RnnloopError", "ModelError", "UnsupportedModelError", "InputError",
           "OpError", "RunError", "FallbackWarning", "__version__"]
