"""Per-element code of the elementwise ops: the expression that computes one output element.

`scalar_expr` turns an op and the expressions of its input elements into one expression of the
output element, with the interpreter's semantics (rnnloop.interp.math_ops is the specification).
The rule in rules.py wraps it in a loop nest with NumPy broadcasting.

The compiled dtypes are float32, float64, int32, int64 and bool; anything else raises NoRule and
the loop stays interpreted. Float constants are emitted in the input's dtype, so float32 math stays
float32 (a bare Python float would promote it to float64). Float32 transcendental functions come
from mathfn (pure arithmetic, vectorisable, within ~3e-7 of libm); float64 uses libm.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .emitter import NoRule, dtype_name, literal

COMPILED_DTYPES = frozenset(np.dtype(t) for t in ("float32", "float64", "int32", "int64", "bool"))

_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)

# op type -> function(attrs, in_dtypes, out_dtype, args) -> expression
_RULES: dict[str, Callable[..., str]] = {}


def _rule(*op_types: str, kinds: str = "fi"):
    """Register the expression builder of `op_types`; `kinds` are the dtype kinds its first input may have."""
    def register(fn):
        for op_type in op_types:
            _RULES[op_type] = (fn, kinds)
        return fn
    return register


def scalar_expr(op_type: str, attrs: dict, in_dtypes: list, out_dtype, args: list[str]) -> str:
    """The expression of one output element of `op_type`, given expressions of its input elements.

    Absent optional inputs have dtype None and expression "". Raises NoRule when the op or a dtype
    is not compiled.
    """
    if op_type not in _RULES:
        raise NoRule(f"no elementwise code for {op_type}")
    fn, kinds = _RULES[op_type]
    dtypes = [None if d is None else np.dtype(d) for d in in_dtypes]
    for d in [*dtypes, np.dtype(out_dtype)]:
        if d is not None and d not in COMPILED_DTYPES:
            raise NoRule(f"{op_type} on {d} is not compiled (compiled: float32, float64, int32, int64, bool)")
    if dtypes[0].kind not in kinds:
        raise NoRule(f"{op_type} on {dtypes[0]} is not compiled")
    return fn(attrs, dtypes, np.dtype(out_dtype), args)


def _const(value, dtype) -> str:
    return literal(np.asarray(value).astype(dtype)[()], dtype)


def _float_fn(f32: str, f64: str):
    """A unary float function: the mathfn float32 version, the libm float64 one."""
    def build(attrs, dtypes, out, args):
        return f"{f32 if dtypes[0] == _F32 else f64}({args[0]})"
    return build


# ---------------------------------------------------------------------------------------------
# arithmetic


@_rule("Add")
def _add(attrs, dtypes, out, args):
    return f"({args[0]} + {args[1]})"


@_rule("Sub")
def _sub(attrs, dtypes, out, args):
    return f"({args[0]} - {args[1]})"


@_rule("Mul")
def _mul(attrs, dtypes, out, args):
    return f"({args[0]} * {args[1]})"


@_rule("Div")
def _div(attrs, dtypes, out, args):
    if dtypes[0].kind == "i":
        return f"_m.div_int({args[0]}, {args[1]})"  # truncates; a zero divisor raises
    return f"({args[0]} / {args[1]})"


@_rule("Mod")
def _mod(attrs, dtypes, out, args):
    fmod = int(attrs.get("fmod", 0))
    if fmod not in (0, 1):
        raise NoRule(f"fmod must be 0 or 1, got {fmod}")
    if dtypes[0].kind == "i":
        return f"_m.{'fmod_int' if fmod else 'mod_int'}({args[0]}, {args[1]})"
    return f"np.fmod({args[0]}, {args[1]})" if fmod else f"_m.mod_float({args[0]}, {args[1]})"


@_rule("Pow")
def _pow(attrs, dtypes, out, args):
    x, y = args
    if dtypes[0].kind == "i" and dtypes[1].kind == "i":
        return f"_m.pow_int({x}, {y})"  # wraps in 64 bits; the store wraps to the output's width
    if dtypes[0].kind == "f" and dtypes[0] == dtypes[1]:
        return f"np.power({x}, {y})"
    # Mixed types: NumPy computes in float64 and converts back to X's dtype.
    wide = f"np.power(np.float64({x}), np.float64({y}))"
    if dtypes[0].kind == "i":
        return f"_m.float_to_{dtypes[0].name}({wide})"
    return wide


@_rule("Neg")
def _neg(attrs, dtypes, out, args):
    return f"(-{args[0]})"


@_rule("Abs")
def _abs(attrs, dtypes, out, args):
    return f"abs({args[0]})"


@_rule("Sign")
def _sign(attrs, dtypes, out, args):
    return f"_m.sign_{'int' if dtypes[0].kind == 'i' else 'float'}({args[0]})"


@_rule("Reciprocal", kinds="f")
def _reciprocal(attrs, dtypes, out, args):
    return f"({_const(1, dtypes[0])} / {args[0]})"


_rule("Sqrt", kinds="f")(_float_fn("np.sqrt", "np.sqrt"))
_rule("Exp", kinds="f")(_float_fn("_m.exp_f32", "np.exp"))
_rule("Log", kinds="f")(_float_fn("_m.log_f32", "np.log"))
_rule("Floor", kinds="f")(_float_fn("np.floor", "np.floor"))
_rule("Ceil", kinds="f")(_float_fn("np.ceil", "np.ceil"))
_rule("Round", kinds="f")(_float_fn("np.rint", "np.rint"))  # halves to even, as np.round
_rule("Sin", kinds="f")(_float_fn("np.sin", "np.sin"))
_rule("Cos", kinds="f")(_float_fn("np.cos", "np.cos"))
_rule("Erf", kinds="f")(_float_fn("math.erf", "math.erf"))
_rule("Tanh", kinds="f")(_float_fn("_m.tanh_f32", "np.tanh"))
_rule("Sigmoid", kinds="f")(_float_fn("_m.sigmoid_f32", "_m.sigmoid_f64"))
_rule("Softplus", kinds="f")(_float_fn("_m.softplus_f32", "_m.softplus_f64"))


@_rule("Max")
def _max(attrs, dtypes, out, args):
    expr = args[0]
    for a in args[1:]:
        expr = f"_m.maximum({expr}, {a})"
    return expr


@_rule("Min")
def _min(attrs, dtypes, out, args):
    expr = args[0]
    for a in args[1:]:
        expr = f"_m.minimum({expr}, {a})"
    return expr


@_rule("Sum")
def _sum(attrs, dtypes, out, args):
    return f"({' + '.join(args)})"


@_rule("Mean", kinds="f")
def _mean(attrs, dtypes, out, args):
    return f"(({' + '.join(args)}) / {_const(len(args), dtypes[0])})"


@_rule("Clip")
def _clip(attrs, dtypes, out, args):
    x, low, high = (args + ["", ""])[:3]
    if not low and not high and dtypes[0].kind == "i":
        return x
    # Omitted bounds are the type's finite extremes, so infinities clip to them (as the spec says).
    info = np.finfo(dtypes[0]) if dtypes[0].kind == "f" else np.iinfo(dtypes[0])
    low = low or _const(info.min, dtypes[0])
    high = high or _const(info.max, dtypes[0])
    return f"_m.minimum(_m.maximum({x}, {low}), {high})"


# ---------------------------------------------------------------------------------------------
# activations (float attributes become constants of the input's dtype)


@_rule("Relu")
def _relu(attrs, dtypes, out, args):
    return f"_m.maximum({args[0]}, {_const(0, dtypes[0])})"


@_rule("LeakyRelu", kinds="f")
def _leaky_relu(attrs, dtypes, out, args):
    return f"_m.leaky({args[0]}, {_const(attrs.get('alpha', 0.01), dtypes[0])})"


@_rule("PRelu")
def _prelu(attrs, dtypes, out, args):
    return f"_m.leaky({args[0]}, {args[1]})"


@_rule("ThresholdedRelu", kinds="f")
def _thresholded_relu(attrs, dtypes, out, args):
    t = dtypes[0]
    return f"_m.thresholded({args[0]}, {_const(attrs.get('alpha', 1.0), t)}, {_const(0, t)})"


@_rule("Elu", kinds="f")
def _elu(attrs, dtypes, out, args):
    t = dtypes[0]
    return f"_m.elu_{'f32' if t == _F32 else 'f64'}({args[0]}, {_const(attrs.get('alpha', 1.0), t)})"


@_rule("Selu", kinds="f")
def _selu(attrs, dtypes, out, args):
    t = dtypes[0]
    alpha = _const(attrs.get("alpha", 1.67326319217681884765625), t)
    gamma = _const(attrs.get("gamma", 1.05070102214813232421875), t)
    return f"_m.selu_{'f32' if t == _F32 else 'f64'}({args[0]}, {alpha}, {gamma})"


@_rule("HardSigmoid", kinds="f")
def _hard_sigmoid(attrs, dtypes, out, args):
    t = dtypes[0]
    linear = f"{args[0]} * {_const(attrs.get('alpha', 0.2), t)} + {_const(attrs.get('beta', 0.5), t)}"
    return f"_m.minimum(_m.maximum({linear}, {_const(0, t)}), {_const(1, t)})"


@_rule("ScaledTanh", kinds="f")
def _scaled_tanh(attrs, dtypes, out, args):
    t = dtypes[0]
    tanh = "_m.tanh_f32" if t == _F32 else "np.tanh"
    return f"({_const(attrs.get('alpha', 1.0), t)} * {tanh}({_const(attrs.get('beta', 1.0), t)} * {args[0]}))"


@_rule("Affine", kinds="f")
def _affine(attrs, dtypes, out, args):
    t = dtypes[0]
    return f"({_const(attrs.get('alpha', 1.0), t)} * {args[0]} + {_const(attrs.get('beta', 0.0), t)})"


@_rule("Softsign", kinds="f")
def _softsign(attrs, dtypes, out, args):
    return f"({args[0]} / ({_const(1, dtypes[0])} + abs({args[0]})))"


# ---------------------------------------------------------------------------------------------
# comparisons and logic


def _compare(symbol: str):
    def build(attrs, dtypes, out, args):
        return f"({args[0]} {symbol} {args[1]})"
    return build


_rule("Equal", kinds="fib")(_compare("=="))
_rule("Less")(_compare("<"))
_rule("LessOrEqual")(_compare("<="))
_rule("Greater")(_compare(">"))
_rule("GreaterOrEqual")(_compare(">="))
_rule("And", kinds="b")(_compare("&"))
_rule("Or", kinds="b")(_compare("|"))
_rule("Xor", kinds="b")(_compare("^"))


@_rule("Not", kinds="b")
def _not(attrs, dtypes, out, args):
    return f"(not {args[0]})"


@_rule("IsNaN", kinds="f")
def _isnan(attrs, dtypes, out, args):
    return f"({args[0]} != {args[0]})"


@_rule("IsInf", kinds="f")
def _isinf(attrs, dtypes, out, args):
    x = args[0]
    negative, positive = int(attrs.get("detect_negative", 1)), int(attrs.get("detect_positive", 1))
    tests = ([f"{x} == np.inf"] if positive else []) + ([f"{x} == -np.inf"] if negative else [])
    return f"({' or '.join(tests)})" if tests else "False"


@_rule("Where", kinds="b")
def _where(attrs, dtypes, out, args):
    return f"({args[1]} if {args[0]} else {args[2]})"


# ---------------------------------------------------------------------------------------------
# conversions


@_rule("Cast", kinds="fib")
def _cast(attrs, dtypes, out, args):
    x, source = args[0], dtypes[0]
    if source == out:
        return x
    if out == np.bool_:
        return f"({x} != 0)"  # NaN converts to True, as in NumPy
    if source.kind == "f" and out.kind == "i":
        return f"_m.float_to_{out.name}({x})"  # NaN and out-of-range values as NumPy's astype gives
    return f"{dtype_name(out)}({x})"  # integers wrap; floats round to nearest


# ---------------------------------------------------------------------------------------------
# front-end activations (rnnloop.interp.small_ops is the specification)


@_rule("Gelu", kinds="f")
def _gelu(attrs, dtypes, out, args):
    approximate = attrs.get("approximate", "none")
    if approximate not in ("none", "tanh"):
        raise NoRule(f"approximate '{approximate}'")
    name = "gelu" if approximate == "none" else "gelu_tanh"
    return f"_m.{name}_{'f32' if dtypes[0] == _F32 else 'f64'}({args[0]})"


_rule("Mish", kinds="f")(_float_fn("_m.mish_f32", "_m.mish_f64"))


@_rule("Celu", kinds="f")
def _celu(attrs, dtypes, out, args):
    t = dtypes[0]
    return f"_m.celu_{'f32' if t == _F32 else 'f64'}({args[0]}, {_const(attrs.get('alpha', 1.0), t)})"


@_rule("HardSwish", kinds="f")
def _hard_swish(attrs, dtypes, out, args):
    t = dtypes[0]
    return f"_m.hard_swish({args[0]}, {_const(1 / 6, t)}, {_const(0.5, t)}, {_const(0, t)}, {_const(1, t)})"


@_rule("Shrink")
def _shrink(attrs, dtypes, out, args):
    t, x = dtypes[0], args[0]
    lambd, bias = float(attrs.get("lambd", 0.5)), float(attrs.get("bias", 0.0))
    if t.kind == "f":
        return f"_m.shrink({x}, {_const(-lambd, t)}, {_const(lambd, t)}, {_const(bias, t)}, {_const(0, t)})"
    # integers in float64, truncated back (NumPy's astype of NaN and out-of-range values)
    low, high, shift, zero = (_const(v, _F64) for v in (-lambd, lambd, bias, 0))
    return f"_m.float_to_{t.name}(_m.shrink(np.float64({x}), {low}, {high}, {shift}, {zero}))"


ELEMENTWISE = frozenset(_RULES)
