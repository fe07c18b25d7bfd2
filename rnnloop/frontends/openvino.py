"""OpenVINO IR front end: lists every unsupported layer at once, then lowers the layers into the IR.

Values are named by the IR builder; `(layer id, output port)` pairs map to them. TensorIterator and
Loop become the IR's Loop (rnnloop/frontends/openvino_control.py); other layers have converters in
rnnloop/frontends/openvino_ops.py, looked up by type and opset version like ONNX ops.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..builder import Builder
from ..errors import ModelError, UnsupportedModelError
from ..ir import Graph, Origin, TensorType
from .openvino_ir import Layer, Net, read_ir
from .registry import CONVERTERS, Unsupported, find_converter, unsupported_listing

FORMAT = "openvino"
STATEFUL = {"ReadValue", "Assign"}


def load_ir(xml_path: str, bin_path: str | None = None) -> Graph:
    """Read an OpenVINO IR model and lower it into one closed IR graph."""
    return convert_net(read_ir(xml_path, bin_path))


def convert_net(net: Net) -> Graph:
    from . import openvino_control, openvino_ops, openvino_rnn  # noqa: F401  (register the converters)
    count, listing = unsupported_listing(_prescan(net))
    if count:
        raise UnsupportedModelError(f"the model uses {count} unsupported layer(s):\n{listing}\n"
                                    "Convert the model with supported layers, or open an issue naming them.")
    b = Builder(net.name or "main")
    params = [layer for layer in net.layers.values() if layer.type == "Parameter"]
    inputs = {}
    for layer in params:
        name = b.claim((layer.outputs[0].names or [layer.name])[0])
        b.input(name, _port_type(layer.outputs[0]))
        inputs[layer.id] = name
    results = lower_net(net, b, inputs)
    for layer in [lay for lay in net.layers.values() if lay.type == "Result"]:  # in the file's order
        value = results[layer.id]
        name = layer.attrs.get("output_names", "").split(",")[0].strip() or layer.name
        b.op("Identity", [value], [b.claim(name)])
        b.set_type(name, b.graph.types.get(value))
        b.output(name)
    return b.graph


def _port_type(port) -> TensorType:
    return TensorType(port.dtype, port.shape)


def opset_of(layer: Layer) -> int | None:
    version = layer.version
    return int(version[5:]) if version.startswith("opset") and version[5:].isdigit() else None


def _prescan(net: Net):
    """Every layer, bodies included, that no converter handles, with the reason."""
    for layer in net.walk():
        if layer.type in ("Parameter", "Result", "Const"):
            continue
        opset = opset_of(layer)
        problem = None
        if layer.type in STATEFUL:
            problem = ("stateful layers (ReadValue / Assign) are not supported; "
                       "rnnloop runs models whose outputs depend only on their inputs")
        elif opset is None:
            problem = f"version '{layer.version}' is not a standard opset"
        elif find_converter(FORMAT, layer.type, opset) is None:
            known = sorted(CONVERTERS.get((FORMAT, layer.type), {}))
            problem = (f"this version is not supported (supported from opset{known[0]})"
                       if known else f"'{layer.type}' is not supported")
        if problem:
            yield Unsupported(layer.type, layer.name, layer.version, problem, f"layer {layer.id}")


def topological(net: Net) -> list[Layer]:
    """The layers in an order where each follows the layers it reads."""
    waiting = {i: 0 for i in net.layers}
    readers: dict[int, list[int]] = {i: [] for i in net.layers}
    for fl, _, tl, _ in net.edges:
        waiting[tl] += 1
        readers[fl].append(tl)
    ready = [i for i, n in waiting.items() if n == 0]
    order = []
    while ready:
        i = ready.pop()
        order.append(net.layers[i])
        for r in readers[i]:
            waiting[r] -= 1
            if waiting[r] == 0:
                ready.append(r)
    if len(order) != len(net.layers):
        stuck = sorted(net.layers[i].label() for i, n in waiting.items() if n > 0)
        raise ModelError(f"graph '{net.name}' has a cycle through {', '.join(stuck[:5])}")
    return order


def lower_net(net: Net, b: Builder, inputs: dict[int, str]) -> dict[int, str]:
    """Lower the layers of `net` into `b`, its Parameters bound to `inputs` (layer id -> value).
    Returns the value each Result layer receives, by the Result's layer id."""
    source = {(tl, tp): (fl, fp) for fl, fp, tl, tp in net.edges}
    values: dict[tuple[int, int], str] = {}
    results: dict[int, str] = {}
    for layer in topological(net):
        args = []
        for port in layer.inputs:
            producer = source.get((layer.id, port.id))
            if producer is None:
                raise ModelError(f"{layer.label()}: input port {port.id} is not connected")
            args.append(values[producer])
        if layer.type == "Parameter":
            if layer.id not in inputs:
                raise ModelError(f"{layer.label()}: the Parameter is not bound to any input")
            values[(layer.id, layer.outputs[0].id)] = inputs[layer.id]
        elif layer.type == "Result":
            if len(args) != 1:
                raise ModelError(f"{layer.label()}: a Result takes one input, it has {len(args)}")
            results[layer.id] = args[0]
        elif layer.type == "Const":
            name = b.constant(layer.const)
            values[(layer.id, layer.outputs[0].id)] = name
        else:
            outputs = [b.fresh(layer.type.lower()) for _ in layer.outputs]
            _convert(layer, b, args, outputs)
            for port, name in zip(layer.outputs, outputs):
                values[(layer.id, port.id)] = name
                b.set_type(name, _port_type(port))
    return results


def _convert(layer: Layer, b: Builder, args: list[str], outputs: list[str]) -> None:
    origin = Origin(FORMAT, layer.name, layer.type, opset_of(layer), domain=f"OpenVINO layer {layer.id},")
    fn = find_converter(FORMAT, layer.type, opset_of(layer))
    b.origin = origin
    try:
        fn(LayerContext(layer, b, origin, outputs), *args)
    except TypeError as e:
        raise ModelError(f"{origin}: the layer does not fit the op's inputs ({e}); check it against the "
                         "OpenVINO opset spec") from e
    finally:
        b.origin = None


def _boolean(text: str) -> bool:
    if text.lower() not in ("true", "false", "1", "0"):
        raise ValueError(text)
    return text.lower() in ("true", "1")


class LayerContext:
    """One layer being converted: its builder, outputs, origin, and typed access to its attributes."""

    def __init__(self, layer: Layer, b: Builder, origin: Origin, outputs: list[str]):
        self.layer, self.b, self.origin, self.outputs = layer, b, origin, outputs
        self.data = layer.data

    def emit(self, op_type: str, inputs, **attrs) -> list[str]:
        """Emit an IR op producing this layer's outputs."""
        return self.b.op(op_type, list(inputs), self.outputs, **attrs)

    def fail(self, message: str) -> ModelError:
        return ModelError(f"{self.origin}: {message}")

    def unsupported(self, message: str) -> UnsupportedModelError:
        return UnsupportedModelError(f"{self.origin}: {message}")

    def attr(self, key: str, default: str | None = None) -> str:
        return self._parse(key, default, str, "text")

    def attr_int(self, key: str, default: int | None = None) -> int:
        return self._parse(key, default, int, "an integer")

    def attr_float(self, key: str, default: float | None = None) -> float:
        return self._parse(key, default, float, "a number")

    def attr_bool(self, key: str, default: bool | None = None) -> bool:
        return self._parse(key, default, _boolean, "a boolean")

    def attr_ints(self, key: str, default: list[int] | None = None) -> list[int]:
        return self._parse(key, default, lambda v: [int(x) for x in v.replace(" ", "").split(",") if x],
                           "a list of integers")

    def _parse(self, key: str, default, convert: Callable, what: str):
        """The attribute `key` converted; `default` when it is absent (None: it is required)."""
        value = self.data.get(key)
        if value is None:
            if default is None:
                raise self.fail(f"the attribute '{key}' is missing")
            return default
        try:
            return convert(value)
        except ValueError:
            raise self.fail(f"the attribute {key}='{value}' is not {what}") from None

    def out_dtype(self, k: int = 0) -> np.dtype | None:
        ports = self.layer.outputs
        return ports[k].dtype if k < len(ports) else None

    def in_shape(self, k: int) -> tuple | None:
        ports = self.layer.inputs
        return ports[k].shape if k < len(ports) else None

    def dtype_of(self, name: str) -> np.dtype | None:
        t = self.b.graph.types.get(name)
        return t.dtype if isinstance(t, TensorType) else None

    def type_of(self, name: str):
        return self.b.graph.types.get(name)

    def with_outputs(self, outputs: list[str]) -> LayerContext:
        """The same layer, producing `outputs` instead (a converter that reshapes them after)."""
        return LayerContext(self.layer, self.b, self.origin, outputs)

    def input_index(self, port_id: int) -> int:
        """The position among the layer's inputs of the input port `port_id`."""
        return next(k for k, p in enumerate(self.layer.inputs) if p.id == port_id)

    def const(self, value, dtype=np.int64) -> str:
        return self.b.constant(np.asarray(value, dtype=dtype))
