"""ONNX front end: reads a model, lists every unsupported op at once, and lowers it into the IR."""

from __future__ import annotations

import inspect
import os
import re
from typing import Any, Iterator

import numpy as np
import onnx
from onnx import GraphProto, ModelProto, NodeProto, TypeProto, helper, numpy_helper

from ..builder import Builder
from ..errors import ModelError, UnsupportedModelError
from ..interp.graph import RUNNERS  # importing graph registers every op function
from ..ir import Graph, OptionalType, Origin, SequenceType, TensorType, Type
from . import onnx_control, onnx_nn, onnx_ops, onnx_quant, onnx_rnn, onnx_signal, onnx_small_ops  # noqa: F401  (register the converters)
from .registry import CONVERTERS, Unsupported, find_converter, unsupported_listing

DEFAULT_DOMAINS = ("", "ai.onnx")


def read_model(model: Any, base_dir: str | None = None) -> ModelProto:
    """A ModelProto from a path, bytes or a ModelProto, with external data loaded."""
    try:
        if isinstance(model, ModelProto):
            proto = model
        elif isinstance(model, (bytes, bytearray, memoryview)):
            proto = onnx.load_from_string(bytes(model))
        elif isinstance(model, (str, os.PathLike)):
            path = os.fspath(model)
            if not os.path.exists(path):
                raise ModelError(f"no such model file: '{path}'")
            proto = onnx.load(path, load_external_data=False)
            base_dir = base_dir or os.path.dirname(os.path.abspath(path))
        else:
            raise ModelError(f"cannot load a model from a {type(model).__name__}; pass a path, bytes or an "
                             "onnx.ModelProto")
    except ModelError:
        raise
    except Exception as e:  # protobuf DecodeError and friends
        raise ModelError(f"the model is not a valid ONNX file (truncated or corrupt?): {e}") from e
    _check_text(proto, "model")
    if _uses_external_data(proto):
        if base_dir is None:
            raise ModelError("the model keeps tensors in external data files; load it from its path, or pass "
                             "base_dir= the folder that holds those files")
        try:
            onnx.external_data_helper.load_external_data_for_model(proto, base_dir)
        except Exception as e:
            raise ModelError(f"cannot read the model's external data from '{base_dir}': {e}") from e
    return proto


def _check_text(message: Any, where: str) -> None:
    """Every string field holds text: protobuf hands back invalid UTF-8 as bytes, which corrupt
    files contain and which would otherwise fail far from their cause."""
    for field, value in message.ListFields():
        if field.type not in (field.TYPE_STRING, field.TYPE_MESSAGE):
            continue
        single = isinstance(value, (str, bytes)) or hasattr(value, "ListFields")
        for k, item in enumerate([value] if single else value):
            at = f"{where}.{field.name}" + ("" if single else f"[{k}]")
            if field.type == field.TYPE_MESSAGE:
                _check_text(item, at)
            elif not isinstance(item, str):
                raise ModelError(f"the model is not a valid ONNX file (corrupt?): {at} is not UTF-8 text")


def _uses_external_data(model: ModelProto) -> bool:
    return any(t.data_location == onnx.TensorProto.EXTERNAL
               for t in onnx.external_data_helper._get_all_tensors(model))


def convert_model(model: ModelProto) -> Graph:
    """Lower an ONNX model into one closed IR graph."""
    opsets = {d.domain or "": d.version for d in model.opset_import}
    opsets.setdefault("", opsets.get("ai.onnx", 1))
    types = _collect_types(model)
    count, listing = unsupported_listing(_prescan(model.graph, opsets))
    if count:
        raise UnsupportedModelError(f"the model uses {count} unsupported op(s) or form(s):\n{listing}\n"
                                    "Re-export the model with supported ops, or open an issue naming them.")
    converter = OnnxConverter(opsets, types)
    builder = Builder(model.graph.name or "main")
    for name in _all_names(model.graph):
        builder.claim(name)
    initialized = {t.name for t in model.graph.initializer}
    formal = [i.name for i in model.graph.input if i.name not in initialized]
    converter.convert_graph(model.graph, builder, formal, [])
    return builder.graph


def _collect_types(model: ModelProto) -> dict[str, TypeProto]:
    """Every value's type: declared, or inferred by ONNX. A declared element type that contradicts
    what an op produces is an error: kernels would trust the declaration, the interpreter the op."""
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    except onnx.shape_inference.InferenceError as e:
        contradiction = _type_contradiction(model, str(e))
        if contradiction:
            raise ModelError(contradiction) from None
        inferred = _inferred_leniently(model)
    except Exception:
        inferred = _inferred_leniently(model)
    types: dict[str, TypeProto] = {}
    for graph in _graphs(inferred.graph):
        for info in [*graph.value_info, *graph.input, *graph.output]:
            if info.type.WhichOneof("value"):
                types.setdefault(info.name, info.type)
        for tensor in graph.initializer:  # shape inference lists initializers only when they are inputs
            types.setdefault(tensor.name, onnx.helper.make_tensor_type_proto(tensor.data_type, tensor.dims))
    return types


def _type_contradiction(model: ModelProto, message: str) -> str | None:
    """The error for a strict type inference failure that is a declared element type contradicting
    an op's result, naming the nodes it can be; None for other failures."""
    found = re.search(r"op_type:(\w+)\): \[TypeInferenceError\] Inferred elem type differs from existing "
                      r"elem type: \((\d+)\) vs \((\d+)\)", message)
    if not found:
        return None
    op_type, computed, declared = found.group(1), int(found.group(2)), int(found.group(3))
    declared_types = {info.name: info.type.tensor_type.elem_type for g in _graphs(model.graph)
                      for info in [*g.value_info, *g.output]}
    nodes = [f"{op_type} '{node_name(node, index)}'" for g in _graphs(model.graph)
             for index, node in enumerate(g.node)
             if node.op_type == op_type and any(declared_types.get(o) == declared for o in node.output)]

    def name(code: int) -> str:
        return onnx.TensorProto.DataType.Name(code).lower() if code in onnx.TensorProto.DataType.values() \
            else f"element type {code}, which ONNX does not define"

    return (f"{' or '.join(nodes) or op_type}: computes {name(computed)}, but the model declares its "
            f"output {name(declared)}; fix the declared type (value_info, or a graph's or body's "
            "output)")


def _inferred_leniently(model: ModelProto) -> ModelProto:
    try:
        return onnx.shape_inference.infer_shapes(model)
    except Exception:  # a model shape inference cannot handle still runs; types stay unknown
        return model


def _graphs(graph: GraphProto) -> Iterator[GraphProto]:
    yield graph
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from _graphs(attr.g)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for g in attr.graphs:
                    yield from _graphs(g)


def _all_names(graph: GraphProto) -> set[str]:
    names = set()
    for g in _graphs(graph):
        names.update(i.name for i in g.input)
        names.update(t.name for t in g.initializer)
        for node in g.node:
            names.update(node.output)
    return names


def ir_type(proto: TypeProto | None) -> Type | None:
    """The IR type of an ONNX TypeProto (None when unknown)."""
    if proto is None:
        return None
    kind = proto.WhichOneof("value")
    if kind == "tensor_type":
        t = proto.tensor_type
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(t.elem_type)) if t.elem_type else None
        shape = None
        if t.HasField("shape"):
            shape = tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in t.shape.dim)
        return TensorType(dtype, shape)
    if kind == "sequence_type":
        return SequenceType(ir_type(proto.sequence_type.elem_type) or TensorType())
    if kind == "optional_type":
        return OptionalType(ir_type(proto.optional_type.elem_type) or TensorType())
    return None


def free_names(graph: GraphProto) -> list[str]:
    """Names a graph (or any graph inside it) reads from enclosing scopes, in first-use order."""
    defined = {i.name for i in graph.input} | {t.name for t in graph.initializer}
    free: list[str] = []

    def use(name: str) -> None:
        if name and name not in defined and name not in free:
            free.append(name)

    for node in graph.node:
        for name in node.input:
            use(name)
        for sub in _node_graphs(node):
            for name in free_names(sub):
                use(name)
        defined.update(node.output)
    for out in graph.output:
        use(out.name)
    return free


def _node_graphs(node: NodeProto) -> list[GraphProto]:
    graphs = []
    for attr in node.attribute:
        if attr.type == onnx.AttributeProto.GRAPH:
            graphs.append(attr.g)
        elif attr.type == onnx.AttributeProto.GRAPHS:
            graphs.extend(attr.graphs)
    return graphs


def _since_version(node: NodeProto, opsets: dict[str, int]) -> int | None:
    try:
        return onnx.defs.get_schema(node.op_type, opsets.get(node.domain or "", 1), node.domain or "").since_version
    except Exception:
        return None


def node_name(node: NodeProto, index: int) -> str:
    """The node's name; an unnamed node's is its op type and its index in its graph, like 'Add_3'."""
    return node.name or f"{node.op_type}_{index}"


def _prescan(graph: GraphProto, opsets: dict[str, int]) -> Iterator[Unsupported]:
    """Every node, subgraphs included, that no converter handles, with the reason."""
    for index, node in enumerate(graph.node):
        domain = node.domain or "ai.onnx"
        version = f"{domain} opset {opsets.get(node.domain or '', '?')}"
        since = _since_version(node, opsets) if node.domain in DEFAULT_DOMAINS else None
        problem = None
        if node.domain == onnx_quant.MICROSOFT:  # only the ops onnxruntime's quantiser emits
            known = sorted(op for fmt, op in CONVERTERS if fmt == onnx_quant.MICROSOFT)
            problem = (_attribute_problem(node, 1, onnx_quant.MICROSOFT)
                       if find_converter(onnx_quant.MICROSOFT, node.op_type, 1) is not None else
                       f"'{node.op_type}' of the domain 'com.microsoft' is not supported (supported: {', '.join(known)})")
        elif node.domain not in DEFAULT_DOMAINS:
            problem = f"the domain '{node.domain}' is not supported"
        elif since is None:
            problem = "not an ONNX op at this opset"
        elif find_converter("onnx", node.op_type, since) is None:
            known = sorted(CONVERTERS.get(("onnx", node.op_type), {}))
            problem = (f"the opset {since} form is not supported (supported since opset {known[0]})"
                       if known else f"'{node.op_type}' is not supported")
        else:
            problem = _attribute_problem(node, since)
        if problem:
            yield Unsupported(node.op_type, node_name(node, index), version, problem)
        for sub in _node_graphs(node):
            yield from _prescan(sub, opsets)


def _attribute_problem(node: NodeProto, since: int, fmt: str = "onnx") -> str | None:
    """Attributes the converter (or, for ops passed as they are, the interpreter) does not take."""
    fn = find_converter(fmt, node.op_type, since)
    if fn is onnx_ops.convert_as_is:
        fn = RUNNERS.get(node.op_type)
    if fn is None:
        return None
    params = inspect.signature(fn).parameters
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return None
    unknown = sorted(a.name for a in node.attribute if a.name not in params)
    return f"attribute(s) {', '.join(unknown)} are not supported" if unknown else None


def attribute_value(attr: onnx.AttributeProto) -> Any:
    """An attribute as a Python value: dtypes as numpy dtypes, tensors as arrays, graphs as protos."""
    if attr.type == onnx.AttributeProto.TENSOR:
        return numpy_helper.to_array(attr.t)
    if attr.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS):
        return attr.g if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs)
    value = helper.get_attribute_value(attr)
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if attr.type == onnx.AttributeProto.STRINGS:
        return [v.decode("utf-8") for v in value]
    if attr.name in ("to", "dtype") and attr.type == onnx.AttributeProto.INT:
        return np.dtype(helper.tensor_dtype_to_np_dtype(value))
    if attr.type == onnx.AttributeProto.INTS:
        return list(value)
    return value


class Node:
    """One ONNX node being converted: its builder, outputs, origin and helpers for converters."""

    def __init__(self, converter: "OnnxConverter", b: Builder, proto: NodeProto, origin: Origin):
        self.converter, self.b, self.proto, self.origin = converter, b, proto, origin
        self.op_type = proto.op_type
        self.outputs = list(proto.output)

    def emit(self, op_type: str, inputs, **attrs) -> list[str]:
        """Emit an IR op producing this node's outputs."""
        return self.b.op(op_type, list(inputs), self.outputs, **attrs)

    def dtype_of(self, name: str) -> np.dtype | None:
        t = ir_type(self.converter.types.get(name))
        return t.dtype if isinstance(t, TensorType) else None

    def type_of(self, name: str) -> Type | None:
        return ir_type(self.converter.types.get(name))

    def subgraph(self, graph: GraphProto, formal: list[str], captures: list[str], label: str) -> Graph:
        """Convert a body graph into a closed IR graph taking `formal` then `captures` as inputs."""
        sub = self.b.sub(f"{self.origin.name}/{label}")
        self.converter.convert_graph(graph, sub, formal, captures)
        return sub.graph


class OnnxConverter:
    """Converts ONNX graphs node by node through the converter registry."""

    def __init__(self, opsets: dict[str, int], types: dict[str, TypeProto]):
        self.opsets, self.types = opsets, types

    def convert_graph(self, graph: GraphProto, b: Builder, formal: list[str], captures: list[str]) -> None:
        for name in [*formal, *captures]:
            b.input(name, ir_type(self.types.get(name)))
        for tensor in graph.initializer:
            if tensor.name not in formal:
                b.constant(numpy_helper.to_array(tensor), name=tensor.name)
                b.set_type(tensor.name, ir_type(self.types.get(tensor.name)))
        for index, node in enumerate(graph.node):
            self.convert_node(node, b, index)
        for out in graph.output:
            b.output(out.name)

    def convert_node(self, node: NodeProto, b: Builder, index: int) -> None:
        opset = self.opsets.get(node.domain or "", 1)
        origin = Origin("onnx", node_name(node, index), node.op_type, opset, node.domain or "ai.onnx")
        if node.domain == onnx_quant.MICROSOFT:
            fn = find_converter(onnx_quant.MICROSOFT, node.op_type, 1)
        else:
            fn = find_converter("onnx", node.op_type, _since_version(node, self.opsets))
        attrs = {}
        for a in node.attribute:
            try:
                attrs[a.name] = attribute_value(a)
            except (KeyError, ValueError) as e:  # an element type code ONNX does not define, say
                raise ModelError(f"{origin}: attribute '{a.name}' = {helper.get_attribute_value(a)!r} "
                                 "is not a value ONNX defines") from e
        inputs = list(node.input)
        b.origin = origin
        try:
            fn(Node(self, b, node, origin), *inputs, **attrs)
        except TypeError as e:
            raise ModelError(f"{origin}: the node does not fit the op's inputs and attributes ({e}); "
                             "check it against the ONNX spec of this opset") from e
        finally:
            b.origin = None
        for name in node.output:
            if name:
                b.set_type(name, ir_type(self.types.get(name)))
