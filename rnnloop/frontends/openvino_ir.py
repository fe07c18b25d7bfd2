"""Reads OpenVINO IR (v10/v11 `.xml` + `.bin`) into plain records, without OpenVINO installed.

Only structure is read here: layers with their ports and `<data>` attributes, edges, the port maps
and back edges of TensorIterator / Loop bodies, and Const payloads from the weights file. What the
layers mean is the converter's business (rnnloop/frontends/openvino.py).
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

import numpy as np

from ..errors import ModelError

# element_type (Const / Parameter data) and port precision spellings -> dtype
ELEMENT_TYPES = {
    "f32": np.float32, "f16": np.float16, "f64": np.float64, "i8": np.int8, "i16": np.int16,
    "i32": np.int32, "i64": np.int64, "u8": np.uint8, "u16": np.uint16, "u32": np.uint32,
    "u64": np.uint64, "boolean": np.bool_,
}
PRECISIONS = {
    "FP32": np.float32, "FP16": np.float16, "FP64": np.float64, "I8": np.int8, "I16": np.int16,
    "I32": np.int32, "I64": np.int64, "U8": np.uint8, "U16": np.uint16, "U32": np.uint32,
    "U64": np.uint64, "BOOL": np.bool_, "BOOLEAN": np.bool_,
}


@dataclass
class Port:
    id: int
    dtype: np.dtype | None  # None: a precision rnnloop does not know (the layer converter decides)
    shape: tuple[int | None, ...] | None  # a None dimension is dynamic; None: unknown rank
    names: list[str] = field(default_factory=list)


@dataclass
class PortMap:
    """One port_map entry of a TensorIterator or Loop: an outer port and the body layer it maps to."""

    external_port_id: int
    internal_layer_id: int
    axis: int | None = None
    start: int = 0
    end: int = -1
    stride: int = 1
    part_size: int = 1
    purpose: str = ""  # Loop: "current_iteration" / "execution_condition"


@dataclass
class Layer:
    id: int
    name: str
    type: str
    version: str
    data: dict[str, str]
    inputs: list[Port]
    outputs: list[Port]
    attrs: dict[str, str] = field(default_factory=dict)  # the <layer> element's own attributes
    body: Net | None = None
    input_map: list[PortMap] = field(default_factory=list)
    output_map: list[PortMap] = field(default_factory=list)
    back_edges: list[tuple[int, int]] = field(default_factory=list)  # (from body layer, to body layer)
    const: np.ndarray | None = None
    # If-8: "then" and "else", each a body with its own port map (inputs, outputs)
    branches: dict[str, tuple[Net, list[PortMap], list[PortMap]]] = field(default_factory=dict)

    def label(self) -> str:
        return f"{self.type} '{self.name}' (layer {self.id}, {self.version})"


@dataclass
class Net:
    """A graph of layers: the model itself or the body of a TensorIterator / Loop."""

    name: str
    layers: dict[int, Layer]
    edges: list[tuple[int, int, int, int]]  # (from layer, from port, to layer, to port)

    def walk(self):
        """Every layer, bodies included, depth first."""
        for layer in self.layers.values():
            yield layer
            if layer.body is not None:
                yield from layer.body.walk()
            for branch, _, _ in layer.branches.values():
                yield from branch.walk()


def read_ir(xml_path: str, bin_path: str | None = None) -> Net:
    """The model at `xml_path`, with its weights from `bin_path` (default: the `.bin` beside it)."""
    if not os.path.exists(xml_path):
        raise ModelError(f"no such model file: '{xml_path}'")
    bin_path = bin_path or os.path.splitext(xml_path)[0] + ".bin"
    try:
        root = ET.parse(xml_path).getroot()
    except ET.ParseError as e:
        raise ModelError(f"'{xml_path}' is not valid OpenVINO IR XML (truncated or corrupt?): {e}") from e
    if root.tag != "net":
        raise ModelError(f"'{xml_path}' is not OpenVINO IR: its root element is <{root.tag}>, not <net>")
    version = root.get("version", "")
    if version not in ("10", "11"):
        raise ModelError(f"'{xml_path}' is OpenVINO IR version {version or '?'}; rnnloop reads versions 10 and 11")
    weights = _Weights(bin_path)
    return _net(root, root.get("name", "model"), weights)


class _Weights:
    """The `.bin` file, read on the first Const that needs it."""

    def __init__(self, path: str):
        self.path, self._data = path, None

    def slice(self, offset: int, size: int, layer: str) -> bytes:
        if self._data is None:
            if not os.path.exists(self.path):
                raise ModelError(f"{layer}: the weights file '{self.path}' does not exist; keep it beside the "
                                 ".xml, with the same name")
            with open(self.path, "rb") as f:
                self._data = f.read()
        if offset < 0 or size < 0 or offset + size > len(self._data):
            raise ModelError(f"{layer}: its data [{offset}, {offset + size}) lies outside the weights file "
                             f"'{self.path}' ({len(self._data)} bytes): the file is truncated or not this model's")
        return self._data[offset:offset + size]


def _net(element: ET.Element, name: str, weights: _Weights) -> Net:
    layers_el = element.find("layers")
    if layers_el is None:
        raise ModelError(f"graph '{name}' has no <layers>")
    layers: dict[int, Layer] = {}
    for el in layers_el.findall("layer"):
        layer = _layer(el, weights)
        if layer.id in layers:
            raise ModelError(f"graph '{name}': layer id {layer.id} is used twice")
        layers[layer.id] = layer
    edges = []
    edges_el = element.find("edges")
    for el in (edges_el.findall("edge") if edges_el is not None else []):
        edge = tuple(_int(el, k, f"an edge of graph '{name}'") for k in ("from-layer", "from-port", "to-layer", "to-port"))
        edges.append(edge)
    net = Net(name, layers, edges)
    _check_edges(net)
    return net


def _check_edges(net: Net) -> None:
    for fl, fp, tl, tp in net.edges:
        for layer_id, port, side in ((fl, fp, "outputs"), (tl, tp, "inputs")):
            layer = net.layers.get(layer_id)
            if layer is None:
                raise ModelError(f"graph '{net.name}': edge {fl}:{fp} -> {tl}:{tp} names layer {layer_id}, "
                                 "which does not exist")
            if all(p.id != port for p in getattr(layer, side)):
                raise ModelError(f"graph '{net.name}': edge {fl}:{fp} -> {tl}:{tp} names port {port} of "
                                 f"{layer.label()}, which has no such {side[:-1]} port")


def _int(el: ET.Element, key: str, where: str, default: int | None = None) -> int:
    value = el.get(key)
    if value is None:
        if default is not None:
            return default
        raise ModelError(f"{where}: the attribute '{key}' is missing")
    try:
        return int(value)
    except ValueError:
        raise ModelError(f"{where}: the attribute {key}='{value}' is not an integer") from None


def _layer(el: ET.Element, weights: _Weights) -> Layer:
    where = f"layer {el.get('id', '?')} '{el.get('name', '?')}'"
    data_el = el.find("data")
    layer = Layer(
        id=_int(el, "id", where), name=el.get("name", ""), type=el.get("type", ""), version=el.get("version", ""),
        data=dict(data_el.attrib) if data_el is not None else {},
        inputs=_ports(el.find("input"), where), outputs=_ports(el.find("output"), where), attrs=dict(el.attrib))
    if not layer.type:
        raise ModelError(f"{where}: the layer has no type")
    body = el.find("body")
    if body is not None:
        layer.body = _net(body, f"{layer.name}/body", weights)
        layer.input_map, layer.output_map = _port_map(el.find("port_map"), layer)
        back = el.find("back_edges")
        layer.back_edges = [(_int(e, "from-layer", layer.label()), _int(e, "to-layer", layer.label()))
                            for e in (back.findall("edge") if back is not None else [])]
    for branch in ("then", "else"):
        body = el.find(f"{branch}_body")
        if body is not None:
            net = _net(body, f"{layer.name}/{branch}", weights)
            layer.branches[branch] = (net, *_port_map(el.find(f"{branch}_port_map"), layer, net, branch))
    if layer.type == "Const":
        layer.const = _const(layer, weights)
    if layer.type == "Parameter" and layer.outputs and "shape" in layer.data:
        # A port without <dim> is a scalar or of unknown rank; the Parameter's own shape tells which.
        layer.outputs[0].shape = _declared_shape(layer.data["shape"])
    return layer


def _declared_shape(text: str) -> tuple[int | None, ...] | None:
    """A Parameter's shape attribute: "?,5,4" or "1..8,5" (None for a dynamic dimension), "" for a
    scalar, "..." for an unknown rank (None)."""
    text = text.replace(" ", "")
    if text == "...":
        return None
    dims = tuple(int(d) if d.isdigit() else None for d in text.split(",")) if text else ()
    if any(d is not None and d > _MAX_DIM for d in dims):
        raise ModelError(f"a shape of {text!r} has a dimension beyond int64")
    return dims


_MAX_DIM = 2**63 - 1


def _ports(el: ET.Element | None, where: str) -> list[Port]:
    ports = []
    for p in (el.findall("port") if el is not None else []):
        dims = []
        for d in p.findall("dim"):
            text = (d.text or "").strip()
            dim = int(text) if text.lstrip("-").isdigit() and int(text) >= 0 else None
            if dim is not None and dim > _MAX_DIM:
                raise ModelError(f"{where}: port {p.get('id')} has a dimension of {dim}, beyond int64")
            dims.append(dim)
        precision = p.get("precision", "")
        dtype = PRECISIONS.get(precision.upper())
        names = [n.strip() for n in p.get("names", "").split(",") if n.strip()]
        ports.append(Port(_int(p, "id", where), np.dtype(dtype) if dtype else None, tuple(dims), names))
    return ports


def _port_map(el: ET.Element | None, layer: Layer, body: Net | None = None,
              branch: str = "") -> tuple[list[PortMap], list[PortMap]]:
    tag = f"{branch}_port_map" if branch else "port_map"
    if el is None:
        raise ModelError(f"{layer.label()}: the layer has a {branch + '_' if branch else ''}body but no <{tag}>")
    maps = {"input": [], "output": []}
    for entry in el:
        if entry.tag not in maps:
            continue
        where = f"{layer.label()}: a {tag} {entry.tag}"
        axis = entry.get("axis")
        maps[entry.tag].append(PortMap(
            _int(entry, "external_port_id", where), _int(entry, "internal_layer_id", where),
            None if axis is None else _int(entry, "axis", where), _int(entry, "start", where, 0),
            _int(entry, "end", where, -1), _int(entry, "stride", where, 1), _int(entry, "part_size", where, 1),
            entry.get("purpose", "")))
    body_ids = set((body or layer.body).layers)
    for m in maps["input"] + maps["output"]:
        if m.internal_layer_id not in body_ids:
            raise ModelError(f"{layer.label()}: the port map names body layer {m.internal_layer_id}, which does "
                             "not exist")
    return maps["input"], maps["output"]


def _const(layer: Layer, weights: _Weights) -> np.ndarray:
    where = layer.label()
    element_type = layer.data.get("element_type", "")
    dtype = ELEMENT_TYPES.get(element_type)
    if dtype is None:
        raise ModelError(f"{where}: element type '{element_type}' is not supported "
                         f"({', '.join(ELEMENT_TYPES)})")
    shape_text = layer.data.get("shape", "").replace(" ", "")
    try:
        shape = tuple(int(d) for d in shape_text.split(",")) if shape_text else ()
        offset, size = int(layer.data.get("offset", "")), int(layer.data.get("size", ""))
    except ValueError:
        raise ModelError(f"{where}: shape '{layer.data.get('shape')}', offset and size must be integers") from None
    count = int(np.prod(shape, dtype=np.int64))
    expected = count * np.dtype(dtype).itemsize
    if size != expected and count:  # (OpenVINO writes size 1 for an empty tensor)
        raise ModelError(f"{where}: size {size} does not match {count} elements of {element_type} "
                         f"({expected} bytes)")
    raw = weights.slice(offset, expected, where)
    return np.frombuffer(raw, dtype=dtype, count=count).reshape(shape).copy()
