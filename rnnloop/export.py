"""IR graphs as ONNX models, so that a Network or a traced function runs in any ONNX runtime.

Ops pass through in their ONNX form (the IR's ops are ONNX ops at opset 18, see
frontends/onnx_ops.py, but for a few in a newer form: GroupNormalization-21, Gelu-20, attributes
and modes added since); Affine and ScaledTanh, which ONNX dropped, become Mul/Add/Tanh. A model is
written at the lowest opset from 18 that has every op of it in its IR form (model_opset), with the IR
version that opset needs, so that runtimes as old as that opset read it. The loop
construct becomes an ONNX Loop: a sliced input is a Gather at the iteration number from the
outer-scope tensor, and a stacked output is the Loop's scan output (stacked on axis 0, forward)
reversed, padded and moved to its axis after the loop.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, TypeProto, defs, helper, numpy_helper

from .errors import UnsupportedModelError
from .ir import (
    Graph,
    If,
    Loop,
    Op,
    OptionalType,
    SequenceType,
    Slice,
    Stack,
    TensorType,
    Type,
    iter_ops,
)

OPSET = 18  # the opset of the IR's ops (IR_VERSION 8: what onnxruntime 1.14 and later read)
IR_VERSION = 8
# Ops whose IR form ONNX has only from a newer opset: GroupNormalization's scale and bias per channel
# (21; per group at 18), Gelu (20).
_NEWER = {"GroupNormalization": 21, "Gelu": 20}
# Attribute values ONNX added after OPSET: (op, attribute, value) -> the opset that has them.
_NEWER_VALUES = {("Pad", "mode", "wrap"): 19, ("Resize", "coordinate_transformation_mode", "half_pixel_symmetric"): 19}
_INT64_MAX, _INT64_MIN = np.iinfo(np.int64).max, np.iinfo(np.int64).min


def type_proto(t: Type | None) -> TypeProto:
    """The ONNX TypeProto of an IR type (an empty one when the type is unknown)."""
    if isinstance(t, TensorType):
        elem = helper.np_dtype_to_tensor_dtype(np.dtype(t.dtype)) if t.dtype is not None else 0
        shape = None if t.shape is None else [d if isinstance(d, (int, str)) else None for d in t.shape]
        return helper.make_tensor_type_proto(elem, shape)
    if isinstance(t, SequenceType):
        return helper.make_sequence_type_proto(type_proto(t.elem))
    if isinstance(t, OptionalType):
        return helper.make_optional_type_proto(type_proto(t.elem))
    return TypeProto()


def attribute(name: str, value: Any) -> onnx.AttributeProto:
    """An IR attribute as ONNX writes it: dtypes as TensorProto codes, arrays as tensors."""
    if isinstance(value, np.dtype) or (name in ("to", "dtype") and isinstance(value, type)):
        value = helper.np_dtype_to_tensor_dtype(np.dtype(value))
    elif isinstance(value, np.ndarray):
        value = numpy_helper.from_array(value)
    elif isinstance(value, np.generic):
        value = value.item()
    return helper.make_attribute(name, value)


def node_proto(op: Op, name: str = "") -> onnx.NodeProto:
    """An op that is not control flow as one ONNX node."""
    node = helper.make_node(op.op_type, list(op.inputs), list(op.outputs), name=name)
    node.attribute.extend(attribute(k, v) for k, v in sorted(op.attrs.items()))
    return node


def op_opset(op: Op) -> int:
    """The lowest opset from OPSET whose ONNX op has `op`'s IR form: its meaning, its attributes and
    their values (an op ONNX does not define, or one of the IR's own, counts as OPSET)."""
    if op.op_type == "DFT":  # (DFT-17's axis attribute is written as DFT-20's input where the model needs 20)
        return 20 if len(op.inputs) > 2 and op.inputs[2] else OPSET
    version = _NEWER.get(op.op_type, OPSET)
    for (op_type, name, value), since in _NEWER_VALUES.items():
        if op.op_type == op_type and op.attrs.get(name) in (value, value.encode()):
            version = max(version, since)
    for candidate in range(version, defs.onnx_opset_version() + 1) if op.attrs else ():
        try:
            if set(op.attrs) <= set(defs.get_schema(op.op_type, candidate).attributes):
                return candidate
        except defs.SchemaError:
            break
    return version  # (an attribute no opset has: written as it is, at the opset of the rest)


def model_opset(graph: Graph) -> int:
    """The opset a graph is written at: the highest op_opset of its ops, subgraphs' included."""
    return max([OPSET, *(op_opset(op) for op in iter_ops(graph) if not op.subgraphs)])


def to_onnx(graph: Graph, path: str | os.PathLike | None = None) -> onnx.ModelProto:
    """The graph as an ONNX model (at model_opset(graph), 18 for most), written to `path` when one is given."""
    opset = model_opset(graph)
    exporter = _Exporter(graph, opset)
    imports = [helper.make_opsetid("", opset)]
    model = helper.make_model(exporter.graph(graph, top=True), opset_imports=imports, producer_name="rnnloop",
                              ir_version=max(IR_VERSION, helper.find_min_ir_version_for(imports)))
    if path is not None:
        onnx.save(model, os.fspath(path))
    return model


class _Exporter:
    """Converts one IR graph and its subgraphs; fresh names never clash with the model's."""

    def __init__(self, graph: Graph, opset: int):
        self.opset = opset
        self.used = set()
        for g in [graph, *(s for op in iter_ops(graph) for s in op.subgraphs)]:
            self.used.update(g.inputs, g.outputs, g.constants, (n for op in g.ops for n in op.outputs))
        self.counter = 0
        self.node_names: set[str] = set()

    def node_name(self, op: Op) -> str:
        """The op's origin name, unique in the model (a cloned op gets a suffix)."""
        name = op.origin.name if op.origin else op.outputs[0]
        if name in self.node_names:
            name = self.fresh(name)
        self.node_names.add(name)
        return name

    def fresh(self, hint: str) -> str:
        while True:
            self.counter += 1
            name = f"{hint}__x{self.counter}"
            if name not in self.used:
                self.used.add(name)
                return name

    def graph(self, g: Graph, top: bool = False, inputs: list[onnx.ValueInfoProto] | None = None,
              prologue: list[onnx.NodeProto] = (), outputs: list[str] | None = None) -> onnx.GraphProto:
        nodes = list(prologue)
        for op in g.ops:
            self._op(g, op, nodes)
        out_names = list(g.outputs if outputs is None else outputs)
        if inputs is None:
            inputs = [helper.make_value_info(n, type_proto(g.type_of(n))) for n in g.inputs]
        # A graph output must be a distinct value computed in the graph: copy inputs and repeats.
        seen, passthrough = set(), {i.name for i in inputs} | set(g.constants)
        for k, name in enumerate(out_names):
            if name in seen or (not top and name in passthrough):
                copy = self.fresh(name)
                nodes.append(helper.make_node("Identity", [name], [copy]))
                out_names[k] = copy
            seen.add(out_names[k])
        source = dict(zip(out_names, list(g.outputs if outputs is None else outputs)))
        return helper.make_graph(
            nodes, g.name, inputs,
            [helper.make_value_info(n, type_proto(g.type_of(source[n]))) for n in out_names],
            initializer=[numpy_helper.from_array(np.asarray(v), name=k) for k, v in g.constants.items()])

    def _op(self, g: Graph, op: Op, nodes: list) -> None:
        if isinstance(op, Loop):
            self._loop(g, op, nodes)
        elif isinstance(op, If):
            nodes.append(helper.make_node("If", [op.inputs[0]], op.outputs,
                                          then_branch=self._branch(op, op.then_graph),
                                          else_branch=self._branch(op, op.else_graph), name=self.node_name(op)))
        elif op.op_type in ("Affine", "ScaledTanh"):
            self._dropped_op(g, op, nodes)
        elif op.op_type == "DFT" and self.opset >= 20 and not (len(op.inputs) > 2 and op.inputs[2]):
            # DFT-17's axis attribute (default 1) as DFT-20's input (whose default is -2)
            axis = self._const(nodes, op.attrs.get("axis", 1))
            inputs = [op.inputs[0], op.inputs[1] if len(op.inputs) > 1 else "", axis]
            attrs = {k: v for k, v in op.attrs.items() if k != "axis"}
            nodes.append(node_proto(Op("DFT", inputs, op.outputs, attrs, op.origin), self.node_name(op)))
        else:
            nodes.append(node_proto(op, self.node_name(op)))

    def _dropped_op(self, g: Graph, op: Op, nodes: list) -> None:
        """Affine (alpha*x + beta) and ScaledTanh (alpha*tanh(beta*x)) in ops ONNX still has."""
        t = g.type_of(op.inputs[0])
        if not isinstance(t, TensorType) or t.dtype is None:
            raise UnsupportedModelError(f"{op.where()}: exporting it needs the dtype of its input")
        alpha, beta = (self._const(nodes, op.attrs.get(k, d), t.dtype) for k, d in
                       (("alpha", 1.0), ("beta", 0.0 if op.op_type == "Affine" else 1.0)))
        x, y = op.inputs[0], op.outputs[0]
        if op.op_type == "Affine":
            scaled = self.fresh("affine")
            nodes += [helper.make_node("Mul", [x, alpha], [scaled]), helper.make_node("Add", [scaled, beta], [y])]
        else:
            inner, tanh = self.fresh("scaled"), self.fresh("tanh")
            nodes += [helper.make_node("Mul", [x, beta], [inner]), helper.make_node("Tanh", [inner], [tanh]),
                      helper.make_node("Mul", [tanh, alpha], [y])]

    def _branch(self, op: If, branch: Graph) -> onnx.GraphProto:
        """An If branch reads its captures from the enclosing scope: its inputs become Identities."""
        prologue = [helper.make_node("Identity", [outer], [inner]) for outer, inner in zip(op.inputs[1:], branch.inputs)]
        return self.graph(branch, inputs=[], prologue=prologue)

    def _const(self, nodes: list, value: Any, dtype: Any = np.int64) -> str:
        """A Constant node appended to `nodes`; returns its output name."""
        name = self.fresh("c")
        nodes.append(helper.make_node("Constant", [], [name],
                                      value=numpy_helper.from_array(np.asarray(value, dtype=dtype))))
        return name

    def _loop(self, g: Graph, op: Loop, nodes: list) -> None:
        carried, sources, invariants = op.input_groups()
        body = op.body
        n_params = op.body_iteration + op.body_cond_in
        b_in = body.inputs[n_params:]
        b_carried = b_in[:op.n_carried]
        b_slices = b_in[op.n_carried:op.n_carried + len(sources)]
        b_invariants = b_in[op.n_carried + len(sources):]
        iteration = body.inputs[0] if op.body_iteration else self.fresh("i")
        cond_in = body.inputs[op.body_iteration] if op.body_cond_in else self.fresh("cond")

        trip = ""
        if op.trip_count:
            trip = self.fresh("trip")
            nodes.append(helper.make_node("Cast", [op.trip_count], [trip], to=TensorProto.INT64))
        count = ""
        for src, spec in zip(sources, op.sliced):
            n = self._part_count(op, src, spec, nodes)
            if count:
                both = self.fresh("count")
                nodes.append(helper.make_node("Min", [count, n], [both]))
                n = both
            count = n
        if count:
            if trip:
                limited = self.fresh("trip")
                nodes.append(helper.make_node("Min", [trip, count], [limited]))
                trip = limited
            else:
                trip = count
        cond = op.cond or (self._const(nodes, True, np.bool_) if op.body_cond_out else "")

        prologue = []
        for src, spec, name in zip(sources, op.sliced, b_slices):
            index = iteration
            if spec.reverse:  # part count - 1 - i
                last, index = self.fresh("last"), self.fresh("index")
                prologue += [helper.make_node("Sub", [count, self._const(prologue, 1)], [last]),
                             helper.make_node("Sub", [last, iteration], [index])]
            prologue.append(helper.make_node("Gather", [src, index], [name], axis=spec.axis))
        prologue += [helper.make_node("Identity", [outer], [inner]) for outer, inner in zip(invariants, b_invariants)]

        cond_out, carried_next, stacked_values = op.body_groups()
        if not cond_out:
            cond_out = [self.fresh("cond_out")]
            prologue.append(helper.make_node("Identity", [cond_in], cond_out))
        inputs = [helper.make_tensor_value_info(iteration, TensorProto.INT64, []),
                  helper.make_tensor_value_info(cond_in, TensorProto.BOOL, []),
                  *(helper.make_value_info(n, type_proto(body.type_of(n))) for n in b_carried)]
        body_proto = self.graph(body, inputs=inputs, prologue=prologue,
                                outputs=[*cond_out, *carried_next, *stacked_values])

        finals = op.outputs[:op.n_carried]
        raw = [self.fresh("scan") for _ in op.stacked]
        nodes.append(helper.make_node("Loop", [trip, cond, *carried], [*finals, *raw], body=body_proto,
                                      name=self.node_name(op)))
        for k, (spec, y, out) in enumerate(zip(op.stacked, raw, op.outputs[op.n_carried:])):
            self._join(op, spec, y, out, body.type_of(stacked_values[k]), nodes)

    def _part_count(self, op: Loop, src: str, spec: Slice, nodes: list) -> str:
        if spec != Slice(axis=spec.axis, reverse=spec.reverse):
            raise UnsupportedModelError(f"{op.where()}: exporting a sliced input with a window, stride or "
                                        f"part size ({spec}) is not supported; only whole axes are")
        shape, n = self.fresh("shape"), self.fresh("count")
        nodes += [helper.make_node("Shape", [src], [shape]),
                  helper.make_node("Gather", [shape, self._const(nodes, spec.axis)], [n], axis=0)]
        return n

    def _join(self, op: Loop, spec: Stack, y: str, out: str, t: Type | None, nodes: list) -> None:
        """Turn the Loop's scan output y ([n, *value]) into the stacked output `spec` describes."""
        rank = len(t.shape) if isinstance(t, TensorType) and t.shape is not None else None
        steps = []
        if spec.reverse:
            steps.append(lambda x, o: nodes.append(helper.make_node(
                "Slice", [x, self._const(nodes, [-1]), self._const(nodes, [_INT64_MIN]), self._const(nodes, [0]),
                          self._const(nodes, [-1])], [o])))
        if spec.length is not None:
            def pad(x, o):
                shape, n, extra = self.fresh("shape"), self.fresh("n"), self.fresh("pads")
                nodes.extend([helper.make_node("Shape", [x], [shape], start=0, end=1),
                              helper.make_node("Sub", [self._const(nodes, [spec.length]), shape], [n]),
                              helper.make_node("Concat", [self._const(nodes, [0]), n], [extra], axis=0),
                              helper.make_node("Pad", [x, extra, "", self._const(nodes, [0])], [o])])
            steps.append(pad)
        axis = spec.axis
        if spec.concat or axis != 0:
            if rank is None:
                raise UnsupportedModelError(f"{op.where()}: exporting a stacked output on axis {axis} needs "
                                            "the rank of the per-iteration value, which is not known")
            axis = axis % (rank if spec.concat else rank + 1)
            if axis:
                perm = [*range(1, axis + 1), 0, *range(axis + 1, rank + 1)]
                steps.append(lambda x, o: nodes.append(helper.make_node("Transpose", [x], [o], perm=perm)))
            if spec.concat:
                def merge(x, o):
                    head, tail, shape = self.fresh("head"), self.fresh("tail"), self.fresh("shape")
                    nodes.extend([helper.make_node("Shape", [x], [head], start=0, end=axis),
                                  helper.make_node("Shape", [x], [tail], start=axis + 2),
                                  helper.make_node("Concat", [head, self._const(nodes, [-1]), tail], [shape], axis=0),
                                  helper.make_node("Reshape", [x, shape], [o])])
                steps.append(merge)
        if not steps:
            nodes.append(helper.make_node("Identity", [y], [out]))
        for k, step in enumerate(steps):
            nxt = out if k == len(steps) - 1 else self.fresh("stacked")
            step(y, nxt)
            y = nxt
