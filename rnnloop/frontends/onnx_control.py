"""Converters for ONNX control flow: Loop, Scan, If and SequenceMap, all lowered to ir.Loop / ir.If."""

from __future__ import annotations

import numpy as np

from ..errors import ModelError
from ..ir import SequenceType, Slice, Stack, TensorType
from .registry import converts


def _outputs(n, count: int) -> list[str]:
    """The node's outputs padded with fresh names to the count its ports produce."""
    if len(n.outputs) > count:
        raise ModelError(f"{n.origin}: has {len(n.outputs)} outputs, but its body produces only {count}; "
                         "remove the extra outputs or return more values from the body")
    return [o or n.b.fresh("unused") for o in n.outputs] + [n.b.fresh("unused") for _ in range(count - len(n.outputs))]


@converts("Loop", since=1)
def convert_loop(n, M="", cond="", *v_initial, body):
    """ONNX Loop: the body takes (iteration, cond, *carried) and returns (cond, *carried, *scan outputs)."""
    from .onnx import free_names
    n_carried = len(v_initial)
    if len(body.input) != 2 + n_carried:
        raise ModelError(f"{n.origin}: the body takes {len(body.input)} inputs, but a Loop with {n_carried} "
                         f"carried value(s) passes {2 + n_carried} (iteration number, condition, carried values)")
    if len(body.output) < 1 + n_carried:
        raise ModelError(f"{n.origin}: the body returns {len(body.output)} outputs, but a Loop with {n_carried} "
                         f"carried value(s) needs at least {1 + n_carried} (condition, carried values, scan outputs)")
    captures = free_names(body)
    graph = n.subgraph(body, [i.name for i in body.input], captures, "body")
    n_scan = len(body.output) - 1 - n_carried
    n.b.loop(graph, trip_count=M, cond=cond, carried=v_initial, invariants=captures,
             stacked=[Stack(axis=0)] * n_scan, outputs=_outputs(n, n_carried + n_scan),
             body_iteration=True, body_cond_in=True, body_cond_out=True)


def _scan_ports(n, num_scan_inputs: int, inputs, body, scan_input_axes, scan_input_directions,
                scan_output_axes, scan_output_directions):
    if not 0 < num_scan_inputs <= len(inputs):
        raise ModelError(f"{n.origin}: num_scan_inputs is {num_scan_inputs}, but the Scan has "
                         f"{len(inputs)} input(s); it must be between 1 and that")
    n_scan_in = num_scan_inputs
    n_states = len(inputs) - n_scan_in
    n_scan_out = len(body.output) - n_states
    if len(body.input) != len(inputs):
        raise ModelError(f"{n.origin}: the body takes {len(body.input)} inputs, but the Scan passes "
                         f"{len(inputs)} ({n_states} state(s), {n_scan_in} scan input(s))")
    if n_scan_out < 0:
        raise ModelError(f"{n.origin}: the body returns {len(body.output)} outputs, fewer than its "
                         f"{n_states} state(s)")
    in_axes = scan_input_axes or [0] * n_scan_in
    in_dirs = scan_input_directions or [0] * n_scan_in
    out_axes = scan_output_axes or [0] * n_scan_out
    out_dirs = scan_output_directions or [0] * n_scan_out
    for what, values, count in (("scan_input_axes", in_axes, n_scan_in), ("scan_input_directions", in_dirs, n_scan_in),
                                ("scan_output_axes", out_axes, n_scan_out),
                                ("scan_output_directions", out_dirs, n_scan_out)):
        if len(values) != count:
            raise ModelError(f"{n.origin}: {what} has {len(values)} entries for {count} scan values")
    sliced = [Slice(axis=a, reverse=bool(d)) for a, d in zip(in_axes, in_dirs)]
    stacked = [Stack(axis=a, reverse=bool(d)) for a, d in zip(out_axes, out_dirs)]
    return sliced, stacked


@converts("Scan", since=9)
def convert_scan(n, *inputs, body, num_scan_inputs, scan_input_axes=None, scan_input_directions=None,
                 scan_output_axes=None, scan_output_directions=None):
    """ONNX Scan: states are carried, scan inputs sliced, scan outputs stacked, along any axis and direction."""
    from .onnx import free_names
    sliced, stacked = _scan_ports(n, num_scan_inputs, inputs, body, scan_input_axes, scan_input_directions,
                                  scan_output_axes, scan_output_directions)
    n_states = len(inputs) - num_scan_inputs
    captures = free_names(body)
    graph = n.subgraph(body, [i.name for i in body.input], captures, "body")
    n.b.loop(graph, carried=inputs[:n_states], sliced=list(zip(inputs[n_states:], sliced)),
             invariants=captures, stacked=stacked, outputs=_outputs(n, n_states + len(stacked)))


@converts("Scan", since=8)
def convert_scan_8(n, sequence_lens="", *inputs, body, num_scan_inputs, directions=None):
    """Scan-8 has a leading batch axis: an outer loop over the batch runs one Scan per row.

    With sequence_lens, row b scans its first sequence_lens[b] steps; its scan outputs are padded with
    zeros to the full sequence length and its final states are those after its last step.
    """
    from .onnx import free_names
    sliced, stacked = _scan_ports(n, num_scan_inputs, inputs, body, None, directions, None, None)
    n_states = len(inputs) - num_scan_inputs
    captures = free_names(body)
    b = n.b
    row = b.sub(f"{n.origin.name}/row")
    row.origin = n.origin
    states = [row.input(b.fresh("state"), None) for _ in range(n_states)]
    xs = [row.input(b.fresh("x"), None) for _ in range(num_scan_inputs)]
    length = row.input(b.fresh("len")) if sequence_lens else ""
    inner_captures = [row.input(b.fresh(c.replace("/", "_"))) for c in captures]
    steps = row.op1("Shape", xs[0], start=0, end=1) if xs else ""
    if length:  # scan only the row's own steps
        zero, axis0 = row.constant([0], dtype=np.int64), row.constant([0], dtype=np.int64)
        end = row.op1("Reshape", length, row.constant([1], dtype=np.int64))
        xs = [row.op1("Slice", x, zero, end, axis0) for x in xs]
    body_graph = n.subgraph(body, [i.name for i in body.input], captures, "body")
    results = row.loop(body_graph, carried=states, sliced=list(zip(xs, sliced)), invariants=inner_captures,
                       stacked=stacked)
    finals, ys = results[:n_states], results[n_states:]
    if length:
        pad = row.op1("Sub", steps, row.op1("Reshape", length, row.constant([1], dtype=np.int64)))
        pads = row.op1("Concat", row.constant([0], dtype=np.int64), pad, axis=0)
        ys = [row.op1("Pad", y, pads, "", row.constant([0], dtype=np.int64)) for y in ys]
    for name in [*finals, *ys]:
        row.output(name)
    per_row = [(x, Slice(axis=0)) for x in inputs] + ([(sequence_lens, Slice(axis=0))] if sequence_lens else [])
    b.loop(row.graph, sliced=per_row, invariants=captures, stacked=[Stack(axis=0)] * (n_states + len(stacked)),
           outputs=_outputs(n, n_states + len(stacked)))


@converts("If", since=1)
def convert_if(n, cond, *, then_branch, else_branch):
    """ONNX If: both branches become closed graphs over the union of their captures."""
    from .onnx import free_names
    captures = list(dict.fromkeys(free_names(then_branch) + free_names(else_branch)))
    for branch in (then_branch, else_branch):
        if len(branch.output) != len(n.outputs):
            raise ModelError(f"{n.origin}: branch '{branch.name}' returns {len(branch.output)} outputs, "
                             f"the If node has {len(n.outputs)}")
    then_graph = n.subgraph(then_branch, [], captures, "then")
    else_graph = n.subgraph(else_branch, [], captures, "else")
    n.b.if_(cond, then_graph, else_graph, captures, n.outputs)


@converts("SequenceMap", since=17)
def convert_sequence_map(n, input_sequence, *additional_inputs, body):
    """SequenceMap: a loop over the first sequence's length that appends each body result to a sequence."""
    from .onnx import free_names, ir_type
    b = n.b
    inputs = [input_sequence, *additional_inputs]
    if len(body.input) != len(inputs):
        raise ModelError(f"{n.origin}: the body takes {len(body.input)} inputs, the node passes {len(inputs)}")
    is_seq = [isinstance(n.type_of(x), SequenceType) or x == input_sequence for x in inputs]
    captures = free_names(body)
    loop_body = b.sub(f"{n.origin.name}/body")
    loop_body.origin = n.origin
    i = loop_body.input(b.fresh("i"))
    carried = [loop_body.input(b.fresh("acc")) for _ in body.output]
    invariants = [loop_body.input(b.fresh("in")) for _ in inputs]
    for name in captures:
        loop_body.input(name, n.type_of(name))
    for formal, value, seq in zip(body.input, invariants, is_seq):
        element = loop_body.op1("SequenceAt", value, i) if seq else value
        loop_body.op("Identity", [element], [formal.name])
    n.converter.convert_graph(body, loop_body, [], [])
    loop_body.graph.outputs = []  # the loop body returns the grown sequences instead
    for acc, out in zip(carried, body.output):
        loop_body.output(loop_body.op1("SequenceInsert", acc, out.name))
    empties = []
    for out in body.output:
        elem = ir_type(out.type)
        dtype = elem.dtype if isinstance(elem, TensorType) else None
        if dtype is None:
            raise ModelError(f"{n.origin}: the body output '{out.name}' has no known tensor type; "
                             "declare its element type in the body graph")
        empties.append(b.op1("SequenceEmpty", dtype=dtype))
    count = b.op1("SequenceLength", input_sequence)
    b.loop(loop_body.graph, trip_count=count, carried=empties, invariants=[*inputs, *captures],
           outputs=_outputs(n, len(body.output)), body_iteration=True)
