"""The closed table of ops the IR knows, each with its one-line semantics (ONNX spelling and meaning)."""

from __future__ import annotations

OPS: dict[str, str] = {
    # control flow: the loop construct and branches (rnnloop/ir.py)
    "Loop": "the loop construct: invariant, carried and sliced inputs; final and stacked outputs",
    "If": "run then_graph or else_graph on the captures, by a boolean scalar",
    # elementwise math
    "Add": "a + b, broadcast", "Sub": "a - b, broadcast", "Mul": "a * b, broadcast",
    "Div": "a / b, broadcast; integers truncate toward zero",
    "Pow": "a ** b in the dtype of a", "Mod": "remainder, sign of divisor (fmod=0) or dividend (fmod=1)",
    "Neg": "-x", "Abs": "|x|", "Sqrt": "sqrt(x)", "Exp": "exp(x)", "Log": "log(x)", "Reciprocal": "1 / x",
    "Floor": "floor(x)", "Ceil": "ceil(x)", "Round": "round half to even", "Sign": "-1, 0 or 1",
    "Min": "elementwise minimum of all inputs", "Max": "elementwise maximum of all inputs",
    "Sum": "elementwise sum of all inputs", "Mean": "elementwise mean of all inputs",
    "Clip": "min(max(x, lo), hi)", "Relu": "max(x, 0)", "LeakyRelu": "x if x >= 0 else alpha * x",
    "PRelu": "x if x >= 0 else slope * x", "ThresholdedRelu": "x if x > alpha else 0",
    "Elu": "x if x >= 0 else alpha * (exp(x) - 1)",
    "Selu": "gamma * (x if x > 0 else alpha * (exp(x) - 1))",
    "Sigmoid": "1 / (1 + exp(-x))", "HardSigmoid": "max(0, min(1, alpha * x + beta))",
    "Tanh": "tanh(x)", "ScaledTanh": "alpha * tanh(beta * x)", "Affine": "alpha * x + beta",
    "Softplus": "log(1 + exp(x))", "Softsign": "x / (1 + |x|)", "Erf": "the error function",
    "Sin": "sin(x)", "Cos": "cos(x)",
    "MatMul": "matrix product with NumPy matmul broadcasting",
    "Gemm": "alpha * op(A) @ op(B) + beta * C, op transposing on transA / transB",
    "Einsum": "Einstein summation by equation",
    # convolutions (rnnloop/interp/conv_ops.py)
    "Conv": "sum of W over kernel windows of the padded input, per group of channels, plus B",
    "ConvTranspose": "the gradient of Conv by its input: each input element adds x * W to the output, plus B",
    # comparisons and logic
    "Equal": "a == b", "Less": "a < b", "LessOrEqual": "a <= b", "Greater": "a > b",
    "GreaterOrEqual": "a >= b", "Not": "not x", "And": "a and b", "Or": "a or b", "Xor": "a xor b",
    "IsNaN": "x is NaN", "IsInf": "x is +inf or -inf (as selected)",
    # reductions
    "ReduceSum": "sum over axes", "ReduceMean": "mean over axes", "ReduceMax": "max over axes",
    "ReduceMin": "min over axes", "ReduceProd": "product over axes", "ReduceL2": "sqrt(sum(x^2)) over axes",
    "ReduceLogSumExp": "log(sum(exp(x))) over axes", "ArgMax": "index of the maximum along axis",
    "ArgMin": "index of the minimum along axis", "Softmax": "exp(x) / sum(exp(x)) along axis",
    "LogSoftmax": "x - log(sum(exp(x))) along axis",
    # pooling and normalisation (rnnloop/interp/nn_ops.py)
    "MaxPool": "maximum of each kernel window inside x, and its flat index",
    "AveragePool": "mean of each kernel window inside x (or inside x and its pads)",
    "LpPool": "(sum of |x|^p over each kernel window) ^ (1/p)",
    "GlobalAveragePool": "mean over the axes after N and C", "GlobalMaxPool": "maximum over the axes after N and C",
    "BatchNormalization": "(x - mean) / sqrt(var + epsilon) * scale + B per channel, stored statistics",
    "InstanceNormalization": "standardised per instance and channel, then scale and B per channel",
    "LayerNormalization": "standardised over the axes from axis on, then Scale and B; mean and 1/std",
    "GroupNormalization": "standardised per instance and group of channels, then scale and bias per channel",
    "LpNormalization": "x / ||x||_p along axis", "MeanVarianceNormalization": "(x - E[x]) / std(x) over axes",
    # tensor manipulation
    "Identity": "x", "Cast": "x converted to dtype `to`", "CastLike": "x converted to the dtype of target",
    "ConstantOfShape": "a tensor of the given shape filled with value", "Shape": "the shape of x, int64",
    "Size": "the element count of x, int64", "Reshape": "x with a new shape (0 copies, -1 infers)",
    "Flatten": "x as 2-D, split at axis", "Squeeze": "x without the given size-1 axes",
    "Unsqueeze": "x with size-1 axes inserted", "Transpose": "x with axes permuted",
    "Expand": "x broadcast to a shape", "Tile": "x repeated along each axis", "Concat": "join along axis",
    "Split": "parts along axis", "Slice": "a strided window of x",
    "Gather": "entries of x along axis at indices", "GatherElements": "elements at index tensors along axis",
    "GatherND": "slices at N-dimensional indices", "ScatterND": "x with slices at indices replaced",
    "ScatterElements": "x with elements at indices replaced along axis",
    "Range": "start, start + delta, ... below limit", "Where": "a where cond else b",
    "Pad": "x padded by mode", "CumSum": "cumulative sum along axis",
    "TopK": "the k largest (or smallest) values and their indices along axis",
    "NonZero": "indices of non-zero elements, one row per axis", "Trilu": "upper or lower triangle",
    "OneHot": "one-hot encoding of indices with depth and values", "Dropout": "x (inference mode)",
    # front-end activations and data movers (rnnloop/interp/small_ops.py, resize.py)
    "Gelu": "0.5 x (1 + erf(x / sqrt 2)), or its tanh approximation", "HardSwish": "x * max(0, min(1, x / 6 + 0.5))",
    "Mish": "x * tanh(softplus(x))", "Celu": "max(0, x) + min(0, alpha * (exp(x / alpha) - 1))",
    "Shrink": "x + bias below -lambd, x - bias above lambd, else 0",
    "Hardmax": "1 at the first maximum along axis, 0 elsewhere",
    "Resize": "x resized by scales or to sizes: nearest, linear or cubic (opset 19's form; also nearest_mode "
              "'simple' and coordinate mode 'tf_half_pixel_for_nn' of the older forms)",
    "DepthToSpace": "channels moved into blocks of height and width (DCR or CRD order)",
    "SpaceToDepth": "blocks of height and width moved into channels (DCR or CRD order)",
    "ReverseSequence": "the first sequence_lens[i] steps of each batch entry reversed along time_axis",
    # sequences and optionals
    "SequenceEmpty": "an empty sequence", "SequenceConstruct": "a sequence of the inputs",
    "SequenceInsert": "the sequence with a tensor inserted at position (default: the end)",
    "SequenceAt": "the tensor at position", "SequenceErase": "the sequence without position (default: last)",
    "SequenceLength": "the number of tensors, int64", "ConcatFromSequence": "the tensors joined along axis",
    "SplitToSequence": "parts of x along axis, as a sequence", "Optional": "an optional holding x, or empty",
    "OptionalHasElement": "whether the optional holds a value", "OptionalGetElement": "the optional's value",
}
