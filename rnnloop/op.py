"""Every op the IR knows as a function: `rnnloop.op.sigmoid(x)`, `rnnloop.op.matmul(a, b)`, ...

On symbolic tensors (inside rnnloop.scan, while_loop, fori_loop or trace) a function adds the op
to the network being traced, like the Network's method of the same name. On NumPy arrays it runs
the op at once in the interpreter, so a function written with them works in both worlds.
Inputs and attributes are ONNX's (`rnnloop.op.reduce_sum(x, [1], keepdims=0)`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .interp.graph import run_op
from .ir import Op
from .network import Network, Tensor, _method_name
from .ops import OPS

__all__: list[str] = []


def _function(op_type: str):
    method = getattr(Network, _method_name(op_type))

    def function(*inputs: Any, name: str | None = None, **attrs: Any) -> Any:
        net = next((x.net for x in inputs if isinstance(x, Tensor)), None)
        if net is not None:
            return method(net, *inputs, name=name, **attrs)
        attrs = {k: np.dtype(v) if k in ("to", "dtype") else v for k, v in attrs.items()}
        names = [f"in{k}" if x is not None else "" for k, x in enumerate(inputs)]
        values = [None if x is None else np.asarray(x) for x in inputs]
        return run_op(Op(op_type, names, ["out"], attrs), values)

    function.__name__ = method.__name__
    function.__doc__ = method.__doc__
    return function


for _op_type in OPS:
    if _op_type not in ("Loop", "If"):
        _fn = _function(_op_type)
        globals()[_fn.__name__] = _fn
        __all__.append(_fn.__name__)
