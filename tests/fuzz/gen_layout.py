"""Cases for the ``layout_array`` target: a LayoutArray against numpy.

Every case is Python text (see ``worker.py``): numpy data written as
literals, a LayoutArray made from it in a random layout (every element
type of ``xlashape.primitive_types``, random dimension orders, tiles with
``*`` entries and several levels, legacy padded dimensions, tail padding),
then one operation done to the LayoutArray (``A``) and to a numpy copy of
the same data (also ``A``). ``level`` (0, 1, 2) bounds the rank, the sizes
and the tiling; the minimizer regenerates a failing operation at lower
levels.
"""

from __future__ import annotations

import numpy as np

from xlashape import Layout, Shape
from xlashape.primitive_types import all_array_types

TYPES = [t for t in all_array_types() if t.dtype is not None]
BY_NAME = {t.hlo_name: t for t in TYPES}
FLOAT8 = [t for t in TYPES if t.hlo_name.startswith("f8") or t.hlo_name.startswith("f4")]
SMALL_INTS = [t for t in TYPES if t.is_integral and t.bit_width < 8]
HUGE = [2**63 - 1, -(2**63), 2**64, 2**31, -(2**31) - 1, 2**62, 10**30]

BINARY_OPERATORS = ["+", "-", "*", "/", "//", "%", "**", "&", "|", "^", "<<", ">>",
                    "==", "!=", "<", "<=", ">", ">=", "@"]
BINARY_UFUNCS = ["add", "subtract", "multiply", "true_divide", "floor_divide", "remainder",
                 "power", "maximum", "minimum", "fmax", "fmin", "arctan2", "hypot",
                 "bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift",
                 "logical_and", "logical_or", "logical_xor", "equal", "not_equal", "less",
                 "greater_equal", "copysign", "nextafter", "fmod", "heaviside", "divmod",
                 "float_power", "gcd"]
UNARY_UFUNCS = ["negative", "positive", "absolute", "sign", "sqrt", "square", "exp", "log",
                "sin", "cos", "tanh", "floor", "ceil", "rint", "trunc", "isnan", "isinf",
                "isfinite", "signbit", "logical_not", "invert", "reciprocal", "conjugate",
                "exp2", "log1p", "cbrt", "spacing", "modf", "frexp"]
REDUCTIONS = ["sum", "prod", "min", "max", "mean", "std", "var", "any", "all", "argmin",
              "argmax", "cumsum"]
INPLACE = ["+=", "-=", "*=", "/=", "//=", "%=", "**=", "&=", "|=", "^=", "<<=", ">>="]


def dtype_expr(t) -> str:
    dt = t.dtype
    if dt.type.__module__.startswith("numpy"):
        return "np.bool_" if dt.kind == "b" else f"np.{dt.name}"
    return f"ml_dtypes.{dt.name}"


class Gen:
    def __init__(self, rng: np.random.Generator, level: int):
        self.rng = rng
        self.level = level

    # -- random pieces -------------------------------------------------------
    def choice(self, seq):
        return seq[int(self.rng.integers(len(seq)))]

    def chance(self, p):
        return self.rng.random() < p

    def dims(self):
        max_rank = (1, 2, 4)[self.level]
        max_dim = (3, 4, 6)[self.level]
        rank = int(self.rng.integers(0 if self.level else 1, max_rank + 1))
        return [int(self.rng.integers(0 if self.chance(0.05) else 1, max_dim + 1)) for _ in range(rank)]

    def layout_text(self, t, dims):
        """A random layout the tiling model accepts, as XLA prints it."""
        rank = len(dims)
        m2m = [int(v) for v in self.rng.permutation(rank)]
        tiles = []
        if self.level and self.chance(0.6):
            for _ in range(int(self.rng.integers(1, 3 if self.level == 1 else 4))):
                k = int(self.rng.integers(1, rank + 3))
                e = [self.choice([1, 2, 3, 4, 8, "*"]) for _ in range(k)]
                if e[-1] == "*":
                    e[-1] = self.choice([1, 2, 4])
                tiles.append(tuple(e))
        kw = {}
        if tiles:
            kw["tiles"] = tiles
        if self.level and rank and self.chance(0.15):
            kw["padded_dimensions"] = [d + int(self.rng.integers(0, 3)) for d in dims]
        if self.level and self.chance(0.15):
            kw["tail_padding_alignment_in_elements"] = self.choice([2, 3, 8])
        if t.bit_width < 8 and self.chance(0.3):
            kw["element_size_in_bits"] = self.choice([t.bit_width, 8])
        return str(Shape(t.hlo_name, dims, Layout(m2m, **kw)))

    def values(self, t, n):
        """(python text making a flat array of n values of type t)."""
        dt = t.dtype
        de = dtype_expr(t)
        if dt.kind == "b":
            return f"np.array({[bool(v) for v in self.rng.integers(0, 2, n)]}, dtype=np.bool_)"
        if t.is_integral:
            lo, hi = (-(2 ** (t.bit_width - 1)), 2 ** (t.bit_width - 1)) if t.is_signed_integral \
                else (0, 2 ** t.bit_width)
            if self.chance(0.5):
                vals = [int(v) for v in self.rng.integers(max(lo, -5), min(hi, 6), n)]
            else:
                vals = [int(self.rng.integers(lo, hi, dtype=np.int64)) if hi <= 2**63
                        else int(self.rng.integers(0, 2**63, dtype=np.int64)) * 2 + int(self.rng.integers(2))
                        for _ in range(n)]
            base = "np.uint64" if t.hlo_name == "u64" else "np.int64"
            return f"np.array({vals}, dtype={base}).astype({de})"
        if self.chance(0.5):  # ordinary values
            pool = [0.0, -0.0, 1.0, -1.0, 0.5, 1.5, -2.0, 3.0, 0.25, 7.0, -6.0, 2.5, float("inf")]
            vals = [self.choice(pool) for _ in range(n)]
            if t.is_complex:
                im = [self.choice(pool) for _ in range(n)]
                return (f"(np.array({vals!r}) + 1j * np.array({im!r})).astype({de})"
                        .replace("inf", "float('inf')"))
            return f"np.array({vals!r}).astype({de})".replace("inf", "float('inf')")
        # random bits: NaNs, infinities, subnormals, negative zero
        if t.is_complex:
            w = dt.itemsize // 2
            k = n * 2
        else:
            w, k = dt.itemsize, n
        bits = 4 if t.bit_width == 4 else 8 * w
        ut = {1: "np.uint8", 2: "np.uint16", 4: "np.uint32", 8: "np.uint64"}[w]
        vals = [int(v) for v in self.rng.integers(0, 2 ** min(bits, 63), k, dtype=np.uint64)]
        return f"np.array({vals}, dtype={ut}).view({de})"

    def array(self, name, t=None, dims=None):
        """Setup text for numpy data ``name`` and its (type, dims)."""
        t = t or self.choice(TYPES)
        dims = self.dims() if dims is None else dims
        n = int(np.prod(dims)) if dims else 1
        return f"{name} = {self.values(t, n)}.reshape({tuple(dims)})\n", t, dims

    def int_arg(self, n):
        r = self.rng.random()
        if r < 0.75:
            return str(int(self.rng.integers(-n - 1, n + 1)) if n else int(self.rng.integers(-1, 2)))
        if r < 0.9:
            return repr(self.choice(HUGE))
        return f"Idx({int(self.rng.integers(-n - 1, n + 1)) if self.chance(0.8) else self.choice(HUGE)})"

    def axis_arg(self, rank):
        r = self.rng.random()
        if r < 0.8:
            return str(int(self.rng.integers(-rank, rank))) if rank else "None"
        return self.choice(["None", str(rank), str(-rank - 1), repr(self.choice(HUGE)), "'a'", "1.5",
                            f"Idx({max(rank - 1, 0)})"])

    def slice_arg(self, n):
        def b():
            return "" if self.chance(0.3) else self.int_arg(n)
        step = "" if self.chance(0.5) else self.choice(["1", "2", "-1", "-2", "3", "0",
                                                         repr(self.choice(HUGE)), f"Idx(-1)"])
        return f"{b()}:{b()}" + (f":{step}" if step else "")

    def key(self, dims, kind):
        rank = len(dims)
        if kind == "scalar":
            k = [self.int_arg(d) for d in dims]
            if self.chance(0.1):
                k = k[:-1] if k else ["0"]
            if self.chance(0.05):
                k.append("0")
        elif kind == "slice":
            k = []
            for d in dims:
                k.append(self.slice_arg(d) if self.chance(0.6) else self.int_arg(d))
            if self.chance(0.2):
                k.insert(int(self.rng.integers(len(k) + 1)), "...")
            if self.chance(0.15):
                k.insert(int(self.rng.integers(len(k) + 1)), "None")
            k = k[: int(self.rng.integers(0, len(k) + 1))] if self.chance(0.3) else k
        else:
            k = []
            for d in dims:
                r = self.rng.random()
                if r < 0.4:
                    m = int(self.rng.integers(0, 4))
                    idx = [int(v) for v in self.rng.integers(-d, max(d, 1), m)] if d else []
                    if self.chance(0.1):
                        idx.append(self.choice([d, -d - 1, 2**63 - 1]))
                    k.append(f"np.array({idx}, dtype=np.intp)" if self.chance(0.8) else repr(idx))
                elif r < 0.55:
                    k.append(f"np.array({[bool(v) for v in self.rng.integers(0, 2, d)]}, dtype=bool)")
                elif r < 0.8:
                    k.append(self.slice_arg(d))
                else:
                    k.append(self.int_arg(d))
            if not k:
                k = ["np.array([], dtype=np.intp)"]
            if self.chance(0.15) and rank:
                # one boolean mask of the whole array's shape
                mask = [bool(v) for v in self.rng.integers(0, 2, int(np.prod(dims)))]
                return f"np.array({mask}, dtype=bool).reshape({tuple(dims)})"
        if not k:
            return "()"
        return ", ".join(k) if len(k) > 1 else (k[0] + ("," if self.chance(0.2) else ""))

    def scalar_value(self, t):
        r = self.rng.random()
        if r < 0.3:
            return str(int(self.rng.integers(-3, 8)))
        if r < 0.5:
            return self.choice(["0.5", "-1.5", "2.0", "float('nan')", "float('inf')", "-0.0", "1e30"])
        if r < 0.6:
            return self.choice(["True", "False"])
        if r < 0.65:
            return self.choice(["(1+2j)", "complex(0, -1)"])
        if r < 0.75:
            return repr(self.choice(HUGE + [255, 256, -129, 127, 128]))
        if r < 0.82:
            return self.choice(["Flt(2.5)", "Idx(3)", "'a'", "None", "[1, 2]", "object()"])
        o = self.choice(TYPES)
        return f"{dtype_expr(o)}({self.choice(['1', '2', '-1', '0.5', '3'])})" if not o.is_complex else \
            f"{dtype_expr(o)}(1+1j)"


def _base(g: Gen, t=None):
    """Setup text for x, la_pre making A: (setup, la_pre, np_pre, t, dims, shape_text)."""
    t = t or g.choice(TYPES)
    setup, t, dims = g.array("x", t)
    shape = g.layout_text(t, dims)
    la_pre = f"A = LayoutArray.from_numpy(x, {shape!r})\n"
    np_pre = "A = x.copy()\n"
    return setup, la_pre, np_pre, t, dims, shape


def _case(op, setup, la_pre, la, np_code, **kw):
    c = {"target": "layout_array", "op": op, "kind": "diff", "setup": setup, "la_pre": la_pre,
         "la": la, "np": np_code}
    c.update(kw)
    return c


def _dt_pair(name, t, u=None):
    return f"{name}:{t.hlo_name}" + (f",{u.hlo_name}" if u is not None else "")


# -- the operations ------------------------------------------------------------

def op_roundtrip(g):
    setup, la_pre, np_pre, t, dims, shape = _base(g)
    which = g.choice(["to_numpy", "asarray", "array", "tolist", "copy", "repr_roundtrip", "out"])
    la = {"to_numpy": "out = A.to_numpy()", "asarray": "out = np.asarray(A)",
          "array": "out = np.array(A)", "tolist": "out = A.tolist()", "copy": "out = A.copy()",
          "repr_roundtrip": "import pickle\nout = pickle.loads(pickle.dumps(A))",
          "out": "out = np.empty(x.shape, x.dtype)\nA.to_numpy(out=out)"}[which]
    np_code = {"tolist": "out = x.tolist()"}.get(which, "out = x.copy()")
    return _case(f"roundtrip.{which}", setup, la_pre, la, np_pre + np_code, detail=_dt_pair(which, t))


def op_getitem(g):
    setup, la_pre, np_pre, t, dims, shape = _base(g)
    kind = g.choice(["scalar", "slice", "advanced"])
    key = g.key(dims, kind)
    code = f"out = A[{key}]"
    if kind == "slice" and g.chance(0.3):
        code += "\nout = out.copy() if hasattr(out, 'copy') else out"
    return _case(f"getitem.{kind}", setup, la_pre, code, np_pre + code, detail=_dt_pair(kind, t))


def op_setitem(g):
    setup, la_pre, np_pre, t, dims, shape = _base(g)
    kind = g.choice(["scalar", "slice", "advanced"])
    key = g.key(dims, kind)
    r = g.rng.random()
    la_v = np_v = None
    if r < 0.45:
        la_v = np_v = g.scalar_value(t)
        vk = "scalar"
    elif r < 0.8:
        u = g.choice(TYPES) if g.chance(0.5) else t
        vdims = dims[int(g.rng.integers(0, len(dims) + 1)):] if dims else []
        if g.chance(0.3):
            vdims = [1] * len(vdims)
        s, u, vdims = g.array("v", u, vdims)
        setup += s
        la_v = np_v = "v"
        vk = "array"
    else:  # a 0-d LayoutArray as the value
        u = g.choice(TYPES) if g.chance(0.5) else t
        s, u, _ = g.array("v", u, [])
        setup += s
        la_v = f"LayoutArray.from_numpy(v, {u.hlo_name + '[]'!r})"
        np_v = "v"
        vk = "layout_array_0d"
    la = f"A[{key}] = {la_v}\nout = A"
    npc = f"A[{key}] = {np_v}\nout = A"
    return _case(f"setitem.{kind}.{vk}", setup, la_pre, la, np_pre + npc, detail=_dt_pair(kind, t))


def _operand(g, t, dims):
    """(setup, la text, np text, description, type) for the second operand."""
    r = g.rng.random()
    if r < 0.3:
        v = g.scalar_value(t)
        return "", v, v, "scalar", None
    if r < 0.75:
        u = g.choice(FLOAT8 + SMALL_INTS) if g.chance(0.3) else (g.choice(TYPES) if g.chance(0.6) else t)
        vdims = list(dims)
        if vdims and g.chance(0.3):
            vdims = vdims[int(g.rng.integers(0, len(vdims) + 1)):]
        s, u, _ = g.array("y", u, vdims)
        return s, "y", "y", "array", u
    # a LayoutArray of the same layout (elementwise on the tiled buffers)
    u = t if g.chance(0.6) else g.choice(TYPES)
    s, u, _ = g.array("y", u, list(dims))
    shape2 = g.layout_text(u, list(dims)) if g.chance(0.3) else None
    if shape2 is None:
        la = f"LayoutArray.from_numpy(y, {u.hlo_name!r} + str(A.xla_shape)[str(A.xla_shape).index('['):])"
    else:
        la = f"LayoutArray.from_numpy(y, {shape2!r})"
    return s, "B", "B", "layout_array", u, la


def op_binary(g):
    setup, la_pre, np_pre, t, dims, shape = _base(g)
    o = _operand(g, t, dims)
    s, la_b, np_b, desc, u = o[:5]
    setup += s
    la_pre2 = la_pre
    np_pre2 = np_pre
    if desc == "layout_array":
        la_pre2 += f"B = {o[5]}\n"
        np_pre2 += "B = y.copy()\n"
    form = g.choice(["operator", "ufunc", "reflected"])
    if form == "operator":
        op = g.choice(BINARY_OPERATORS + ["divmod"])
        code = f"out = divmod(A, {la_b})" if op == "divmod" else f"out = A {op} {la_b}"
    elif form == "reflected":
        op = g.choice(BINARY_OPERATORS)
        code = f"out = {la_b} {op} A"
    else:
        op = g.choice(BINARY_UFUNCS)
        code = f"out = np.{op}(A, {la_b})" if g.chance(0.7) else f"out = np.{op}({la_b}, A)"
    return _case(f"binary.{form}.{op}", setup, la_pre2, code, np_pre2 + code,
                 detail=_dt_pair(desc, t, u))


def op_inplace(g):
    setup, la_pre, np_pre, t, dims, shape = _base(g)
    o = _operand(g, t, dims)
    s, la_b, np_b, desc, u = o[:5]
    setup += s
    if desc == "layout_array":
        la_pre += f"B = {o[5]}\n"
        np_pre += "B = y.copy()\n"
    op = g.choice(INPLACE)
    code = f"A {op} {la_b}\nout = A"
    return _case(f"inplace.{op}", setup, la_pre, code, np_pre + code, detail=_dt_pair(desc, t, u))


def op_out(g):
    setup, la_pre, np_pre, t, dims, shape = _base(g)
    s, u, _ = g.array("y", g.choice(TYPES) if g.chance(0.5) else t, list(dims))
    setup += s
    op = g.choice(BINARY_UFUNCS[:-2] + UNARY_UFUNCS[:20])
    args = "A" if op in UNARY_UFUNCS else "A, y"
    r = g.rng.random()
    if r < 0.4:
        out = "A"
        tail = "\nout = A"
    elif r < 0.7:
        ot = g.choice(TYPES)
        setup += f"o = np.zeros({tuple(dims)}, {dtype_expr(ot)})\n"
        out = "o"
        tail = "\nout = o"
    else:
        # ((A, A) only for one-output ufuncs: two outputs in one array are numpy's own business)
        out = g.choice(["np.zeros(3)", "'a'", "[]", "np.zeros((7, 7))", "(None,)",
                        "np.zeros(1, np.int8)[0]", "x[::-1]"]
                       + ([] if op in ("divmod", "modf", "frexp") else ["(A, A)"]))
        tail = ""
    code = f"r = np.{op}({args}, out={out}){tail}"
    return _case(f"out.{op}", setup, la_pre, code, np_pre + code, detail=_dt_pair("out", t, u))


def op_unary(g):
    setup, la_pre, np_pre, t, dims, shape = _base(g)
    form = g.rng.random()
    if form < 0.3:
        op = g.choice(["-", "+", "abs", "~"])
        code = f"out = abs(A)" if op == "abs" else f"out = {op}A"
    else:
        op = g.choice(UNARY_UFUNCS)
        code = f"out = np.{op}(A)"
    return _case(f"unary.{op}", setup, la_pre, code, np_pre + code, detail=_dt_pair("unary", t))


def op_power(g):
    setup, la_pre, np_pre, t, dims, shape = _base(g, g.choice([BY_NAME["c64"], BY_NAME["c128"],
                                                              BY_NAME["f32"], BY_NAME["f16"],
                                                              BY_NAME["bf16"]]))
    e = g.choice(["0.5", "2", "-1", "3", "0", "1.5", "-2", "2.0", "(1+1j)"])
    code = f"out = A ** {e}"
    return _case(f"binary.operator.**", setup, la_pre, code, np_pre + code, detail=_dt_pair("pow", t))


def op_reduce(g):
    setup, la_pre, np_pre, t, dims, shape = _base(g)
    m = g.choice(REDUCTIONS)
    kw = []
    if g.chance(0.7):
        kw.append(f"axis={g.axis_arg(len(dims))}")
    if m not in ("argmin", "argmax", "cumsum") and g.chance(0.3):
        kw.append("keepdims=True")
    if g.chance(0.5):
        code = f"out = A.{m}({', '.join(kw)})"
    else:
        code = f"out = np.{m}(A{''.join(', ' + k for k in kw)})"
    return _case(f"reduce.{m}", setup, la_pre, code, np_pre + code, detail=_dt_pair("reduce", t))


def op_func(g):
    setup, la_pre, np_pre, t, dims, shape = _base(g)
    rank = len(dims)
    n = int(np.prod(dims)) if dims else 1
    f = g.choice(["take", "put", "add.at", "moveaxis", "swapaxes", "transpose", "concatenate",
                  "where", "sort", "clip", "reshape", "ravel", "copyto", "flip", "roll",
                  "repeat", "array_equal", "nonzero", "count_nonzero", "unique", "isin",
                  "dot", "broadcast_to", "squeeze", "expand_dims", "atleast_2d", "full_like",
                  "argsort", "cumprod", "diff", "stack", "trace", "tile"])
    ax = g.axis_arg(rank)
    idx = f"[{', '.join(g.int_arg(n) for _ in range(int(g.rng.integers(0, 4))))}]"
    val = g.scalar_value(t)
    code = {
        "take": f"out = np.take(A, {idx}" + (f", axis={ax})" if g.chance(0.5) else ")"),
        "put": f"np.put(A, {idx}, {val})\nout = A",
        "add.at": f"np.add.at(A, {idx if rank <= 1 else '(' + idx + ',)'}, {val})\nout = A",
        "moveaxis": f"out = np.moveaxis(A, {ax}, {g.axis_arg(rank)})",
        "swapaxes": f"out = np.swapaxes(A, {ax}, {g.axis_arg(rank)})",
        "transpose": f"out = np.transpose(A)",
        "concatenate": f"out = np.concatenate([A, A], axis={ax})",
        "where": "out = np.where(A, A, A)",
        "sort": f"out = np.sort(A, axis={ax})",
        "clip": f"out = np.clip(A, {val}, {g.scalar_value(t)})",
        "reshape": f"out = np.reshape(A, {g.choice(['-1', str((n,)), str((1, n)), str((n, 1, 1)), '(-1, 2)', str((2**62, 0))])})",
        "ravel": "out = np.ravel(A)",
        "copyto": f"np.copyto(A, {val})\nout = A",
        "flip": f"out = np.flip(A, axis={ax})",
        "roll": f"out = np.roll(A, {g.int_arg(3)}, axis={ax})",
        "repeat": f"out = np.repeat(A, {g.choice(['2', '0', '-1'])})",   # 2**62 crashes numpy itself
        "array_equal": "out = np.array_equal(A, x)",
        "nonzero": "out = np.nonzero(A)",
        "count_nonzero": f"out = np.count_nonzero(A)",
        "unique": "out = np.unique(A)",
        "isin": f"out = np.isin(A, [{val}])",
        "dot": "out = np.dot(A, A.T) if A.ndim else np.dot(A, A)",
        "broadcast_to": f"out = np.broadcast_to(A, (2,) + A.shape)",
        "squeeze": "out = np.squeeze(A)",
        "expand_dims": f"out = np.expand_dims(A, {ax})",
        "atleast_2d": "out = np.atleast_2d(A)",
        "full_like": f"out = np.full_like(A, {val})",
        "argsort": f"out = np.argsort(A, axis={ax}, kind='stable')",
        "cumprod": "out = np.cumprod(A)",
        "diff": f"out = np.diff(A, axis={ax})",
        "stack": "out = np.stack([A, A])",
        "trace": "out = np.trace(A)",
        "tile": "out = np.tile(A, 2)",
    }[f]
    return _case(f"func.{f}", setup, la_pre, code, np_pre + code, detail=_dt_pair("func", t))


def op_method(g):
    setup, la_pre, np_pre, t, dims, shape = _base(g)
    rank = len(dims)
    n = int(np.prod(dims)) if dims else 1
    m = g.choice(["T", "transpose", "swapaxes", "reshape", "ravel", "flatten", "fill", "item",
                  "astype", "len", "bool", "int", "float", "complex", "iter", "contains",
                  "tolist", "view_write", "strides", "nbytes"])
    perm = [int(v) for v in g.rng.permutation(rank)]
    if rank and g.chance(0.2):
        perm[0] = g.choice([rank, -1, 2**63 - 1, perm[-1]])
    val = g.scalar_value(t)
    bad_item = g.choice(["'a'", "1.5", "None", "(0,)", "[0]"])
    code = {
        "T": "out = A.T",
        "transpose": f"out = A.transpose({', '.join(map(str, perm))})",
        "swapaxes": f"out = A.swapaxes({g.axis_arg(rank)}, {g.axis_arg(rank)})",
        "reshape": f"out = A.reshape({g.choice(['-1', str(n), str((1, n)), str((n, 1)), '(-1, 2)', '()', str(2**63 - 1)])})",
        "ravel": "out = A.ravel()",
        "flatten": "out = A.flatten()",
        "fill": f"A.fill({val})\nout = A",
        "item": f"out = A.item({', '.join(g.int_arg(n) for _ in range(int(g.rng.integers(0, 3))))})"
                if g.chance(0.8) else f"out = A.item({bad_item})",
        "astype": f"out = A.astype({g.choice([dtype_expr(g.choice(TYPES)), repr('foo'), 'object', 'None', repr('int4'), repr('f8'), 'np.str_'])})",
        "len": "out = len(A)",
        "bool": "out = bool(A)",
        "int": "out = int(A)",
        "float": "out = float(A)",
        "complex": "out = complex(A)",
        "iter": "out = [v for v in A]",
        "contains": f"out = {val} in A",
        "tolist": "out = A.tolist()",
        "view_write": f"v = np.asarray(A)\nv[...] = {val}\nout = A" if rank else "out = A",
        "strides": "out = (A.shape, A.ndim, A.size, A.itemsize)",
        "nbytes": "out = A.nbytes",
    }[m]
    if m == "view_write":
        # np.asarray of a tiled LayoutArray is a copy: only compare the view
        code = f"v = np.array(A)\nv[...] = {val}\nout = v"
    return _case(f"method.{m}", setup, la_pre, code, np_pre + code, detail=_dt_pair("method", t))


def op_relayout(g):
    setup, la_pre, np_pre, t, dims, shape = _base(g)
    other = g.layout_text(t, dims)
    lay = other[other.index("{"):] if "{" in other else "{}"
    form = g.choice(["text", "shape", "layout_obj"])
    arg = {"text": repr(other), "shape": f"xlashape.parse_shape({other!r})",
           "layout_obj": f"xlashape.parse_shape({other!r}).layout"}[form]
    la = f"out = A.relayout({arg})"
    return _case(f"relayout.{form}", setup, la_pre, la, "out = x.copy()", detail=_dt_pair("relayout", t))


def op_dlpack(g):
    setup, la_pre, np_pre, t, dims, shape = _base(g)
    kw = []
    if g.chance(0.7):
        kw.append("max_version=" + g.choice(["(1, 0)", "(0, 8)", "(1,)", "()", "(1, 0, 0)", "None",
                                              "(2**63, 0)", "'ab'", "(Idx(1), 0)", "1", "(-1, 5)"]))
    if g.chance(0.3):
        kw.append("dl_device=" + g.choice(["(1, 0)", "(2, 0)", "None", "(1,)", "'x'"]))
    if g.chance(0.3):
        kw.append("copy=" + g.choice(["True", "False", "None", "1"]))
    if g.chance(0.2):
        kw.append("stream=" + g.choice(["None", "0", "1", "'s'"]))
    form = g.choice(["call", "from_dlpack"])
    if form == "call":
        code = f"cap = A.__dlpack__({', '.join(kw)})\nout = None"
    else:
        kw = [k for k in kw if k.startswith("copy=")]
        if g.chance(0.3):
            kw.append("device=" + g.choice(["'cpu'", "None"]))
        code = f"out = np.from_dlpack(A{''.join(', ' + k for k in kw)})"
    # DLPack has bfloat16 and sub-byte types; numpy refuses to export ml_dtypes' types
    return _case(f"dlpack.{form}", setup, la_pre, code, np_pre + code, detail=_dt_pair("dlpack", t),
                 np_raise_ok=not t.dtype.type.__module__.startswith("numpy"),
                 may_refuse=("ShapeBufferError",))     # no zero-copy DLPack of a tiled layout


def op_buffer(g):
    setup, la_pre, np_pre, t, dims, shape = _base(g)
    form = g.choice(["memoryview", "frombuffer_roundtrip"])
    if form == "memoryview":
        code = "m = memoryview(A)\nout = (m.shape, m.ndim, m.itemsize, np.asarray(m).tobytes() == np.ascontiguousarray(x).tobytes())"
        npc = "m = memoryview(A)\nout = (m.shape, m.ndim, m.itemsize, True)"
        # a tiled or packed layout has no strided view: BufferError, by design
        return _case("buffer.memoryview", setup, la_pre, code, np_pre + npc, detail=_dt_pair("buffer", t),
                     may_refuse=("ShapeBufferError",))
    code = "B = LayoutArray.frombuffer(bytearray(A.physical), A.xla_shape)\nout = B"
    return _case("buffer.frombuffer_roundtrip", setup, la_pre, code, "out = x.copy()",
                 detail=_dt_pair("buffer", t))


def op_frombuffer(g):
    """Raw bytes (PRED bytes other than 0/1 included) read through the tiling model."""
    t = g.choice([x for x in TYPES if x.bit_width >= 8] + [BY_NAME["pred"]] * 4)
    dims = g.dims()
    # the model below reads one byte per element: no E(n) on PRED (E(1) packs
    # eight to a byte, E(8) is the default)
    shape = g.layout_text(t, dims) if t.bit_width >= 8 else \
        g.layout_text(t, dims).replace("E(8)", "").replace("E(1)", "")
    from xlashape import tiling
    try:
        nbytes = tiling.physical_size_in_bytes(shape)
    except Exception:
        return None
    if nbytes > 4096:
        return None
    raw = [int(v) for v in g.rng.integers(0, 256 if g.chance(0.7) else 3, nbytes)]
    de = dtype_expr(t)
    setup = (f"from xlashape import tiling\nraw = bytes({raw})\nshape = {shape!r}\n"
             f"dims = {tuple(dims)}\n"
             f"idx = np.indices(dims).reshape(len(dims), -1).T\n"
             f"off = tiling.linear_indices(shape, idx) if len(dims) else np.array([tiling.linear_index(shape, ())])\n")
    if t.hlo_name == "pred":
        setup += "x = (np.frombuffer(raw, np.uint8)[off] != 0).reshape(dims)\n"
    else:
        setup += f"x = np.frombuffer(raw, {de})[off].reshape(dims)\n"
    la_pre = "A = LayoutArray.frombuffer(bytearray(raw), shape)\n"
    kind = g.choice(["scalar", "slice", "advanced", "to_numpy", "tolist", "reduce", "copy"])
    if kind in ("scalar", "slice", "advanced"):
        code = f"out = A[{g.key(dims, kind)}]"
    else:
        code = {"to_numpy": "out = A.to_numpy()", "tolist": "out = A.tolist()",
                "reduce": "out = A.sum()" if t.hlo_name != "pred" else "out = A.any()",
                "copy": "out = A.copy()"}[kind]
    npc = code.replace("A.to_numpy()", "A.copy()")
    return _case(f"frombuffer.{kind}", setup, la_pre, code, "A = x.copy()\n" + npc,
                 detail=_dt_pair("frombuffer", t))


def op_construct(g):
    """Hostile shapes into the constructor: huge, zero and negative dimensions."""
    t = g.choice(TYPES) if g.chance(0.5) else g.choice([x for x in TYPES if x.bit_width == 8])
    rank = int(g.rng.integers(1, 4))
    dims = []
    for _ in range(rank):
        r = g.rng.random()
        dims.append(g.choice([0, 1]) if r < 0.4 else
                    g.choice([2**63 - 1, 2**63 - 2, 2**62, 2**62 + 1]) if r < 0.7 else
                    g.choice([2, 3, 2**31, 2**32 + 1, 2**40, 10**15]))
    m2m = ",".join(str(v) for v in g.rng.permutation(rank))
    tile = "" if g.chance(0.5) else g.choice([":T(8,128)", ":T(2)", ":T(8,128)(2,1)", ":T(1,128)"])
    text = f"{t.hlo_name}[{','.join(map(str, dims))}]" + ("" if g.chance(0.3) else "{" + m2m + tile + "}")
    form = g.choice(["init", "from_numpy_empty", "frombuffer"])
    code = {"init": f"A = LayoutArray({text!r})\nout = (A.shape, A.size, A.physical_nbytes)",
            "from_numpy_empty": f"A = LayoutArray.from_numpy(np.zeros((0,)), {text!r})",
            "frombuffer": f"A = LayoutArray.frombuffer(bytearray(16), {text!r})"}[form]
    return {"target": "layout_array", "op": f"construct.{form}", "kind": "family", "setup": "",
            "la_pre": "", "la": code, "detail": f"construct:{t.hlo_name}"}


def op_uninit(g):
    """A LayoutArray whose __init__ never ran."""
    what = g.choice(["A.ndim", "len(A)", "A[0]", "list(iter(A))", "A.T", "A.shape", "repr(A)",
                     "A.to_numpy()", "np.asarray(A)", "A + 1", "A.copy()", "A.release()",
                     "A.xla_shape", "A.physical", "A.fill(1)", "A.sum()", "A.__dlpack__()",
                     "memoryview(A)", "A[0] = 1", "A.relayout('{0}')", "bool(A)", "A.exports"])
    code = f"A = LayoutArray.__new__(LayoutArray)\nout = {what}" if "=" not in what.replace("==", "") \
        else f"A = LayoutArray.__new__(LayoutArray)\n{what}"
    return {"target": "layout_array", "op": "uninit", "kind": "family", "setup": "", "la_pre": "",
            "la": code, "detail": "uninit:" + what.split("(")[0].split("[")[0]}


OPS = {
    "roundtrip": (op_roundtrip, 3), "getitem": (op_getitem, 6), "setitem": (op_setitem, 6),
    "binary": (op_binary, 8), "inplace": (op_inplace, 4), "out": (op_out, 3),
    "unary": (op_unary, 4), "power": (op_power, 1), "reduce": (op_reduce, 3),
    "func": (op_func, 5), "method": (op_method, 5), "relayout": (op_relayout, 2),
    "dlpack": (op_dlpack, 2), "buffer": (op_buffer, 2), "frombuffer": (op_frombuffer, 3),
    "construct": (op_construct, 1), "uninit": (op_uninit, 1),
}
_NAMES = list(OPS)
_WEIGHTS = np.array([OPS[k][1] for k in _NAMES], dtype=float)
_WEIGHTS /= _WEIGHTS.sum()


def pick_op(rng):
    return _NAMES[int(rng.choice(len(_NAMES), p=_WEIGHTS))]


# numpy wraps some int64-edge axes instead of refusing them
# (np.zeros(3).transpose(2**63 - 1) returns): there xlashape's error is right
_HUGE_TEXT = tuple(repr(h) for h in HUGE if abs(h) >= 2**62)
_AXIS_ERRORS = ("InvalidShapeError", "ShapeIndexError", "ShapeValueError", "ShapeAxisError",
                "ShapeOverflowError")


def generate(rng: np.random.Generator, level: int = 2, op: str | None = None):
    """One case (a dict), or None when the random draw made nothing usable."""
    op = op or pick_op(rng)
    g = Gen(rng, level)
    try:
        c = OPS[op][0](g)
    except (ValueError, TypeError, OverflowError):
        return None      # a layout the Shape classes refuse: draw again
    if c is not None:
        c["family"] = op
        if op in ("method", "func", "reduce") and any(h in c["la"] for h in _HUGE_TEXT):
            c["may_refuse"] = tuple(c.get("may_refuse", ())) + _AXIS_ERRORS
    return c
