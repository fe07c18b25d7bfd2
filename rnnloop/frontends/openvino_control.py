"""OpenVINO TensorIterator-1 and Loop-5, lowered into the IR's one Loop construct.

The port map says how each body Parameter is fed: an input with an axis is sliced (the IR's sliced
input, a strided view per iteration), an input whose Parameter is the target of a back edge is
carried, any other input is invariant. A Result with an axis is concatenated (the IR's stacked
output); without one it is the last value: the carried value when a back edge leaves from it,
otherwise the last of its stacked values.

OpenVINO slice windows include both ends: start=0, end=-1 is the whole axis, and a negative stride
walks it from start down to end (the usual reverse form is start=-1, end=0, stride=-1).
"""

from __future__ import annotations

import numpy as np

from ..ir import Slice, Stack, TensorType
from .openvino import lower_net
from .openvino_ir import PortMap
from .registry import converts

INT64_MAX = np.iinfo(np.int64).max


@converts("TensorIterator", 1, fmt="openvino")
def convert_tensor_iterator(n, *args):
    _convert(n, args, is_loop=False)


@converts("Loop", 5, fmt="openvino")
def convert_loop(n, *args):
    _convert(n, args, is_loop=True)


def _convert(n, args, is_loop: bool) -> None:
    layer, b = n.layer, n.b
    body = layer.body
    by_port = {p.id: value for p, value in zip(layer.inputs, args)}
    out_by_port = {p.id: name for p, name in zip(layer.outputs, n.outputs)}
    params = {i: lay for i, lay in body.layers.items() if lay.type == "Parameter"}
    results = {i: lay for i, lay in body.layers.items() if lay.type == "Result"}
    back = {}
    for source, target in layer.back_edges:
        if source not in results or target not in params:
            raise n.fail(f"back edge {source} -> {target} must lead from a body Result to a body Parameter")
        back[target] = source

    iteration = next((m for m in layer.input_map if m.purpose == "current_iteration"), None)
    condition = next((m for m in layer.output_map if m.purpose == "execution_condition"), None)
    inputs = [m for m in layer.input_map if m is not iteration]
    outputs = [m for m in layer.output_map if m is not condition]
    for m in inputs:
        if m.internal_layer_id not in params:
            raise n.fail(f"port map input {m.external_port_id} names body layer {m.internal_layer_id}, "
                         "which is not a Parameter")
        if m.external_port_id not in by_port:
            raise n.fail(f"port map input names port {m.external_port_id}, which the layer does not have")
    for m in outputs + ([condition] if condition else []):
        if m.internal_layer_id not in results:
            raise n.fail(f"port map output names body layer {m.internal_layer_id}, which is not a Result")
    for m in outputs:
        if m.external_port_id not in out_by_port:
            raise n.fail(f"port map output names port {m.external_port_id}, which the layer does not have")

    carried = [m for m in inputs if m.axis is None and m.internal_layer_id in back]
    sliced = [m for m in inputs if m.axis is not None]
    invariant = [m for m in inputs if m.axis is None and m.internal_layer_id not in back]
    mapped = {m.internal_layer_id for m in inputs} | ({iteration.internal_layer_id} if iteration else set())
    unfed = [params[i].label() for i in params if i not in mapped]
    if unfed:
        raise n.fail(f"body Parameter(s) {', '.join(unfed)} get no value from the port map")
    missing = [params[t].label() for t in back if t not in {m.internal_layer_id for m in carried}]
    if missing:
        raise n.fail(f"body Parameter(s) {', '.join(missing)} are back edge targets without an initial value")
    if not is_loop and not sliced:
        raise n.unsupported("a TensorIterator without sliced inputs has no iteration count")

    # the body: [iteration?, *carried, *slices, *invariants] -> [cond?, *carried next, *stacked]
    sub = b.sub(f"{layer.name}/body")
    bound: dict[int, str] = {}
    if iteration is not None:
        it = sub.input(sub.fresh("iteration"), TensorType(np.dtype(np.int64), ()))
        param = params[iteration.internal_layer_id]
        dtype = param.outputs[0].dtype
        # (not `dtype in (None, np.int64)`: np.dtype(None) is float64, so float64 == None holds)
        bound[param.id] = it if dtype is None or dtype == np.int64 else sub.op1("Cast", it, to=dtype)
    for m in carried + sliced + invariant:
        port = params[m.internal_layer_id].outputs[0]
        bound[m.internal_layer_id] = sub.input(sub.fresh("p"), TensorType(port.dtype, port.shape))
    values = lower_net(body, sub, bound)

    body_outputs = []
    if condition is not None:
        body_outputs.append(values[condition.internal_layer_id])
    body_outputs += [values[back[m.internal_layer_id]] for m in carried]
    stacked = {}  # external port -> how its values stack (an output without axis: to take the last)
    for m in outputs:
        if m.axis is not None:
            stacked[m.external_port_id] = Stack(axis=m.axis, concat=True, reverse=m.stride < 0)
        elif m.internal_layer_id not in back.values():
            stacked[m.external_port_id] = Stack(axis=0)
        else:
            continue
        body_outputs.append(values[m.internal_layer_id])
    seen = set()
    for k, name in enumerate(body_outputs):  # a body value that leaves twice leaves as two names
        if name in seen or name in sub.graph.inputs:
            body_outputs[k] = sub.op1("Identity", name)
        seen.add(body_outputs[k])
    for name in body_outputs:
        sub.output(name)

    trip, cond = "", ""
    if is_loop:
        trip, cond = _trip_count(n, by_port.get(0, "")), _condition(n, by_port.get(1, ""))
    outs = b.loop(sub.graph, trip_count=trip, cond=cond,
                  carried=[by_port[m.external_port_id] for m in carried],
                  sliced=[(by_port[m.external_port_id], _slice(n, m)) for m in sliced],
                  invariants=[by_port[m.external_port_id] for m in invariant],
                  stacked=list(stacked.values()), body_iteration=iteration is not None,
                  body_cond_out=condition is not None)
    final_of = {back[m.internal_layer_id]: f for m, f in zip(carried, outs)}
    stack_of = dict(zip(stacked, outs[len(carried):]))
    for m in outputs:
        if m.external_port_id not in stack_of:
            value = final_of[m.internal_layer_id]
        elif m.axis is None:  # the last iteration's value
            value = b.op1("Gather", stack_of[m.external_port_id], n.const(-1), axis=0)
        else:
            value = stack_of[m.external_port_id]
        b.op("Identity", [value], [out_by_port[m.external_port_id]])


def _slice(n, m: PortMap) -> Slice:
    """The IR slice of a port map input: OpenVINO's window [start, end] includes both ends."""
    if m.stride == 0 or m.part_size < 1:
        raise n.fail(f"port map input {m.external_port_id}: stride {m.stride} and part_size {m.part_size} "
                     "must be non-zero and positive")

    def past(index: int) -> int | None:  # an inclusive index as the IR's exclusive end
        return None if index == -1 else index + 1

    if m.stride > 0:
        return Slice(axis=m.axis, start=m.start, end=past(m.end), stride=m.stride, part=m.part_size,
                     keep_axis=True)
    # Backwards: OpenVINO's parts hang from start, going down; the IR's rise from the window's low
    # end and are visited in reverse. With step 1 they agree; a longer step needs the window's
    # length to line them up.
    step = -m.stride
    if step == 1:
        return Slice(axis=m.axis, start=m.end, end=past(m.start), stride=1, part=m.part_size, keep_axis=True,
                     reverse=True)
    shape = n.in_shape(n.input_index(m.external_port_id))
    dim = shape[m.axis] if shape is not None and -len(shape) <= m.axis < len(shape) else None
    if dim is None:
        raise n.unsupported(f"port map input {m.external_port_id}: stride {m.stride} needs a fixed size of "
                            f"axis {m.axis}, which the model does not give")
    top = min(m.start + dim if m.start < 0 else m.start, dim - 1)
    low = max(m.end + dim if m.end < 0 else m.end, 0)
    parts = (top - low + 1 - m.part_size) // step + 1 if top - low + 1 >= m.part_size else 0
    first = top - m.part_size + 1 - (parts - 1) * step if parts > 0 else top + 1
    return Slice(axis=m.axis, start=first, end=top + 1, stride=step, part=m.part_size, keep_axis=True,
                 reverse=True)


def _trip_count(n, value: str) -> str:
    """Loop's trip count as the IR's: -1 (any negative) means no limit."""
    b = n.b
    if not value:
        return ""
    known = b.graph.constants.get(value)
    if known is not None:
        return "" if int(np.asarray(known).reshape(-1)[0]) < 0 else b.constant(np.int64(int(known.reshape(-1)[0])))
    count = b.op1("Cast", value, to=np.dtype(np.int64))
    return b.op1("Where", b.op1("Less", count, n.const(0)), n.const(INT64_MAX), count)


def _condition(n, value: str) -> str:
    known = n.b.graph.constants.get(value) if value else None
    if known is not None and bool(np.asarray(known).reshape(-1)[0]):
        return ""  # always true: no condition input
    return value


@converts("If", 8, fmt="openvino")
def convert_if(n, cond, *captures):
    """If-8: both branches take every input after the condition (the IR's captures); each branch's
    port map binds its Parameters to some of them and its Results to the layer's outputs."""
    layer, b = n.layer, n.b
    if set(layer.branches) != {"then", "else"}:
        raise n.fail("an If needs a then_body and an else_body")
    ports = [p.id for p in layer.inputs[1:]]  # the captures' external port ids, in order
    out_ports = [p.id for p in layer.outputs]
    graphs = []
    for branch in ("then", "else"):
        net, inputs, outputs = layer.branches[branch]
        sub = b.sub(f"{layer.name}/{branch}")
        formal = {port: sub.input(sub.fresh("p"), TensorType(layer.inputs[1 + k].dtype, layer.inputs[1 + k].shape))
                  for k, port in enumerate(ports)}
        bound = {}
        for m in inputs:
            if m.external_port_id not in formal:
                raise n.fail(f"{branch}_port_map input names port {m.external_port_id}, which is not one of "
                             f"the layer's data inputs {ports}")
            bound[m.internal_layer_id] = formal[m.external_port_id]
        params = [lay for lay in net.layers.values() if lay.type == "Parameter" and lay.id not in bound]
        if params:
            raise n.fail(f"{branch} body Parameter(s) {', '.join(p.label() for p in params)} get no value "
                         "from the port map")
        values = lower_net(net, sub, bound)
        result_of = {m.external_port_id: m.internal_layer_id for m in outputs}
        missing = [port for port in out_ports if port not in result_of]
        if missing:
            raise n.fail(f"the {branch}_port_map gives no Result for output port(s) {missing}")
        for port in out_ports:
            value = values.get(result_of[port])
            if value is None:
                raise n.fail(f"{branch}_port_map output {port} names layer {result_of[port]}, which is not a Result")
            if value in sub.graph.inputs or value in sub.graph.outputs:  # (a branch output is its own value)
                value = sub.op1("Identity", value)
            sub.output(value)
        graphs.append(sub.graph)
    outs = b.if_(cond, graphs[0], graphs[1], list(captures), len(out_ports))
    for name, out in zip(n.outputs, outs):
        b.op("Identity", [out], [name])
