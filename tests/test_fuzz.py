"""A fuzz test of the public API and the command line, as a careless or hostile user calls it.

Every call must end one of two ways: a result, the same bits on both CPU backends and
equal to the exact reference where there is one (tests/reference.py); or a ValueError
or TypeError (docs/semantics.md, "Errors") whose message is fpsim's own, naming the
problem, and the same on both backends. Anything else (an internal exception, a
message from NumPy's or Python's insides, a hang) fails.

FPSIM_FUZZ_SEED (default 0) and FPSIM_FUZZ_EXAMPLES (default 120 a target) make longer
or other runs: ``FPSIM_FUZZ_EXAMPLES=5000 FPSIM_FUZZ_SEED=7 pytest tests/test_fuzz.py``.
"""

import os
import warnings
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from reference import ref_add, ref_round

import fpsim
from fpsim import cli, nn, optim
from fpsim.precision import parse
from fpsim.training import DynamicLossScale

SEED = int(os.environ.get("FPSIM_FUZZ_SEED", "0"))
EXAMPLES = int(os.environ.get("FPSIM_FUZZ_EXAMPLES", "120"))
fuzz = settings(max_examples=EXAMPLES, deadline=None, database=None,
                suppress_health_check=list(HealthCheck))

# Messages that come from inside NumPy, Python or Numba rather than from fpsim.
INTERNAL = ("object has no attribute", "unsupported operand type", "invalid literal for",
            "division by zero", "not subscriptable", "unhashable type", "positional argument",
            "cannot convert float", "Cannot cast", "ufunc", "Numba", "numba", "TypingError",
            "index out of bounds", "list index", "tuple index", "NoneType' object",
            "not iterable", "must be real number, not", "could not convert")


# --- hostile values ------------------------------------------------------------------------

EXTREME_INTS = [0, 1, -1, 2**53, 2**53 + 1, -(2**63), 2**63 - 1, 2**64 - 1, 2**64, 2**200,
                -(2**1100)]
EXTREME_FLOATS = [0.0, -0.0, 1.0, 0.1, 65504.0, 65520.0, 1e-8, 5.96e-8, 2.0**-149, 1e300,
                  np.inf, -np.inf, np.nan, 5e-324]


def arrays_of(dtypes):
    shapes = st.sampled_from([(), (0,), (1,), (3,), (2, 3), (0, 4), (3, 0), (2, 1, 3)])

    @st.composite
    def build(draw):
        dtype = np.dtype(draw(st.sampled_from(dtypes)))
        shape = draw(shapes)
        n = int(np.prod(shape))
        if dtype.kind == "f":
            pool = st.sampled_from(EXTREME_FLOATS) | st.floats(-1e6, 1e6, width=64)
        elif dtype.kind in "iu":
            info = np.iinfo(dtype)
            pool = st.sampled_from([v for v in EXTREME_INTS if info.min <= v <= info.max])
        elif dtype.kind == "b":
            pool = st.booleans()
        else:
            pool = st.sampled_from([1 + 2j, 0j])
        values = draw(st.lists(pool, min_size=n, max_size=n))
        with np.errstate(all="ignore"):
            arr = np.array(values, dtype=dtype).reshape(shape)
        if draw(st.booleans()) and arr.ndim >= 1 and arr.shape[-1] > 1:
            arr = np.repeat(arr, 2, axis=-1)[..., ::2]  # a strided view
        return arr

    return build()


numbers = (st.sampled_from(EXTREME_FLOATS) | st.sampled_from(EXTREME_INTS)
           | st.sampled_from([Fraction(1, 3), Fraction(3, 4), Fraction(2**80 - 1, 2**80)]))
junk = st.sampled_from([None, "1.0", "fp16", b"x", object(), [1, [2]], {}, (), [None],
                        [1.0, "a"], 1 + 2j, True, np.float128(0.1) if hasattr(np, "float128")
                        else np.longdouble(0.1), np.ma.array([1e9, 1.0], mask=[True, False]),
                        np.ma.array([[0.5, 0.25]])])
operands = (arrays_of(["float16", "float32", "float64", ">f8", "<f4", "int64", "uint64",
                       "int8", "bool", "complex128"])
            | numbers | junk | st.lists(st.sampled_from(EXTREME_FLOATS), max_size=4))
format_args = st.sampled_from(
    ["fp16", "bf16", "tf32", "fp32", "fp64", "fp8_e4m3", "fp8_e5m2", "half", "BF16", "e6m9",
     "e4m3fn", "e0m3", "e12m2", "fp17", "", " fp16 ", None, 16, 5.5, True,
     fpsim.Format(6, 9), fpsim.Format(3, 2, infinities=False), fpsim.Format(2, 1)])
mode_args = st.sampled_from([*fpsim.ROUNDING_MODES, "nearest", "", None, 0, "UP", ["up"]])
seed_args = st.sampled_from([None, 0, 1, 2**32, 2**64 - 1, 2**64, -1, 1.5, "3", True,
                             np.int64(5), np.uint64(2**64 - 1)])
flag_args = st.sampled_from([True, False, np.bool_(True), "no", "", 0, 1, None, [True]])
bits_args = st.sampled_from([None, 1, 8, 53, 54, 0, -3, 2.0, "8", True])


def is_documented(exc: BaseException) -> bool:
    return type(exc) in (ValueError, TypeError, np.exceptions.AxisError) and bool(str(exc)) \
        and not any(phrase in str(exc) for phrase in INTERNAL)


def same(x, y) -> bool:
    """Results equal bit for bit (NaNs by encoding too), dtypes and shapes included."""
    if isinstance(x, tuple) or isinstance(y, tuple):
        return (isinstance(x, tuple) and isinstance(y, tuple) and len(x) == len(y)
                and all(same(a, b) for a, b in zip(x, y, strict=True)))
    if isinstance(x, fpsim.Tensor):
        return isinstance(y, fpsim.Tensor) and x.format == y.format and same(x.data, y.data)
    if isinstance(x, (fpsim.AccumulationStats, fpsim.Format, fpsim.hw.BlockFMA,
                      fpsim.Policy, bool)):
        return x == y
    if not isinstance(x, (np.ndarray, np.generic, float, int)):
        return type(x) is type(y)  # an object (an optimizer, a loss scale): no numbers
    a, b = np.asarray(x), np.asarray(y)
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.kind == "f":
        view = {2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize]
        return np.array_equal(a.view(view), b.view(view))
    return np.array_equal(a, b)


def same_values(got, expected) -> bool:
    """Against the reference: the same encodings, except that any NaN matches any NaN
    (SPEC: any NaN bit pattern is acceptable)."""
    got, expected = np.asarray(got, dtype=np.float64), np.asarray(expected, dtype=np.float64)
    both_nan = np.isnan(got) & np.isnan(expected)
    return same(np.where(both_nan, 0.0, got), np.where(both_nan, 0.0, expected))


def outcome(call):
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            # A seed with another mode than stochastic: fpsim's warning, and a result.
            warnings.filterwarnings("ignore", "seed does nothing", UserWarning)
            return "result", call()
    except Exception as exc:  # judged by the caller
        return "error", exc


def check(call):
    """``call`` on both CPU backends: the same result, or the same documented error."""
    results = []
    for name in ("numpy", "numba"):
        with fpsim.backend(name):
            results.append(outcome(call))
    (kind1, value1), (kind2, value2) = results
    for kind, value in results:
        if kind == "error" and not is_documented(value):
            raise AssertionError(f"undocumented {type(value).__name__}: {value}") from value
    assert kind1 == kind2, f"numpy backend: {kind1} {value1!r}; numba backend: {kind2} {value2!r}"
    if kind1 == "result":
        assert same(value1, value2), f"backends differ: {value1!r} and {value2!r}"
        return value1
    assert type(value1) is type(value2) and str(value1) == str(value2), (value1, value2)
    return None


# --- the targets ---------------------------------------------------------------------------


@seed(SEED)
@fuzz
@given(x=operands, fmt=format_args, mode=mode_args, sub=flag_args, sat=flag_args,
       s=seed_args, rbits=bits_args, flags=flag_args)
def test_round(x, fmt, mode, sub, sat, s, rbits, flags):
    got = check(lambda: fpsim.round(x, fmt, mode, subnormals=sub, saturate=sat, seed=s,
                                    random_bits=rbits, flags=flags))
    if got is None or mode == "stochastic" or isinstance(got, tuple):
        return
    values = np.asarray(x, dtype=np.float64).reshape(-1)[:4]
    expected = [ref_round(float(v), fpsim.format(fmt) if isinstance(fmt, str) else fmt,
                          mode, bool(sub), bool(sat))[0] for v in values]
    assert same_values(np.asarray(got, dtype=np.float64).reshape(-1)[:4], expected)


@seed(SEED)
@fuzz
@given(op=st.sampled_from(["add", "sub", "mul", "div", "sqrt", "fma"]), a=operands,
       b=operands, c=operands, fmt=format_args, mode=mode_args, flags=flag_args)
def test_arithmetic(op, a, b, c, fmt, mode, flags):
    args = {"sqrt": (a,), "fma": (a, b, c)}.get(op, (a, b))
    got = check(lambda: getattr(fpsim, op)(*args, fmt, mode, flags=flags))
    if got is None or op != "add" or mode == "stochastic" or isinstance(got, tuple):
        return
    fmt_obj = fpsim.format(fmt) if isinstance(fmt, str) else fmt
    x, y = (np.broadcast_to(np.asarray(v, dtype=np.float64), np.shape(got)).reshape(-1)
            for v in (a, b))
    expected = [ref_add(float(p), float(q), fmt_obj, mode)[0]
                for p, q in zip(x[:4], y[:4], strict=True)]
    assert same_values(np.asarray(got, dtype=np.float64).reshape(-1)[:4], expected)


@seed(SEED)
@fuzz
@given(x=operands, fmt=format_args, codes=arrays_of(["uint8", "uint16", "int64", "float64",
                                                      "bool"]) | junk)
def test_bits(x, fmt, codes):
    check(lambda: fpsim.to_bits(x, fmt))
    check(lambda: fpsim.from_bits(codes, fmt))


models = st.sampled_from([None, *fpsim.hw.PRESETS.values(), "H100", 3, object()])


@seed(SEED)
@fuzz
@given(a=operands, b=operands, c=st.none() | operands, accum=format_args,
       order=st.sampled_from(["sequential", "pairwise", "any", "random", None]),
       products=st.sampled_from(["exact", "rounded", "fused", None]), model=models,
       stats=flag_args, s=seed_args, out=st.none() | format_args)
def test_products(a, b, c, accum, order, products, model, stats, s, out):
    options = dict(c=c, stats=stats, out=out)
    if model is None:
        options.update(accum=accum, order=order, products=products, seed=s)
    else:
        options.update(model=model)
    check(lambda: fpsim.matmul(a, b, **options))
    check(lambda: fpsim.dot(a, b, **options))


@seed(SEED)
@fuzz
@given(x=operands, axis=st.sampled_from([None, 0, 1, -1, 5, "x", 1.0, True, (0, 1)]),
       accum=format_args, order=st.sampled_from(["sequential", "pairwise", "bogus"]),
       c=st.none() | operands, stats=flag_args)
def test_sums(x, axis, accum, order, c, stats):
    check(lambda: fpsim.sum(x, axis, accum=accum, order=order, c=c, stats=stats))


@seed(SEED)
@fuzz
@given(x=operands, w=operands,
       stride=st.sampled_from([1, 2, 0, -1, (1, 2), (1,), "x", 1.5, None]),
       padding=st.sampled_from([0, 1, -1, (0, 1), "x", None, 2**40]))
def test_convolutions(x, w, stride, padding):
    check(lambda: fpsim.conv2d(x, w, stride=stride, padding=padding))


ints = st.sampled_from([0, 1, 4, 23, 25, 40, 41, -1, 2**40, 1.5, "4", None, True])


@seed(SEED)
@fuzz
@given(e=ints, m=ints, name=st.sampled_from([None, "x", "", 3]), inf=flag_args,
       block=ints, frac=ints, floor=st.sampled_from([None, -132, -132.5, "low", 2**70]),
       inp=format_args, outp=format_args,
       rounding=st.sampled_from(["toward_zero", "nearest_even", "up", None]))
def test_formats_and_models(e, m, name, inf, block, frac, floor, inp, outp, rounding):
    fmt = check(lambda: fpsim.Format(e, m, name=name, infinities=inf))
    if fmt is not None:
        check(lambda: fpsim.round(np.array([0.1, 1e30, -3.0]), fmt, "toward_zero"))
    model = check(lambda: fpsim.hw.BlockFMA("fuzz", block, frac, floor, input=inp,
                                            output=outp, output_rounding=rounding))
    if model is not None:
        a = np.array([[1.0, 0.5, -2.0]])
        check(lambda: fpsim.matmul(a, a.T, model=model))


policy_texts = st.lists(st.sampled_from(
    ["mixed", "fp32", "bf16", "native_fp16", "compute=fp16", "accum=fp16", "accum=e6m9",
     "order=pairwise", "seed=3", "seed=abc", "seed=-1", "seed=99999999999", "rounding=odd",
     "rounding=stochastic", "subnormals=false", "subnormals=maybe", "native=true",
     "softmax.compute=fp32", "sofmax.compute=fp32", "exp.seed=2", "exp.native=true",
     "matmul.accum=bogus", "=", "compute=", ",", "params", "x.y.z=1"]), min_size=1,
    max_size=4).map(",".join)


@seed(SEED)
@fuzz
@given(text=policy_texts)
def test_policies(text):
    policy = check(lambda: parse(text))
    if policy is not None:
        assert parse(str(policy)) == policy


hyper = st.sampled_from([0.1, 0.0, -1.0, np.nan, np.inf, "0.1", None, True, (0.9,),
                         (0.9, 0.999), (0.9, np.nan), 2, 2**70])


@seed(SEED)
@fuzz
@given(data=operands, fmt=st.none() | format_args, other=operands, lr=hyper, momentum=hyper,
       betas=hyper, eps=hyper, growth=hyper, interval=ints)
def test_training_objects(data, fmt, other, lr, momentum, betas, eps, growth, interval):
    t = check(lambda: fpsim.tensor(data, format=fmt))
    if t is not None:
        check(lambda: t + other)
        check(lambda: bool(t))
    check(lambda: optim.SGD(nn.Linear(2, 2).parameters(), lr=lr, momentum=momentum))
    check(lambda: optim.Adam(nn.Linear(2, 2).parameters(), lr=lr, betas=betas, eps=eps))
    check(lambda: DynamicLossScale(growth_factor=growth, growth_interval=interval))


# --- the command line ------------------------------------------------------------------------

words = st.sampled_from(
    ["reproduce", "bench", "compare", "--quick", "--full", "--out", "/dev/null/x", "/proc/x",
     "--seeds", "0", "-3", "abc", "--jobs", "--only", "final_metrics", "nothing", "--tasks",
     "--policies", "mixed", "elementwise", "matmul", "train", "-n", "-5", "--repeats",
     "--sizes", "1,2", "--backend", "cupy", "numba", "--suite", "gpu", "tpu", "--size",
     "--seed", "-1e-7", "0.1", "nan", "--formats", "fp16,bogus", "-h", "--help", "-x"])


@pytest.fixture
def nothing_runs(monkeypatch, tmp_path):
    """The commands' work replaced by nothing (the fuzz is about their arguments), in a
    folder of its own (a command may make its output folder)."""
    from fpsim import bench

    monkeypatch.chdir(tmp_path)
    from fpsim.compare import command
    from fpsim.reproduce import command as reproduce_command

    monkeypatch.setattr(reproduce_command, "reproduce", lambda session, names: None)
    for name in ("run", "run_matmul", "run_training"):
        monkeypatch.setattr(bench, name, lambda *a, **k: [])
    monkeypatch.setattr(bench, "hold_freed_memory", lambda: False)  # not this process's malloc
    monkeypatch.setattr(command, "run", lambda *a, **k: [])


@seed(SEED)
@fuzz
@given(argv=st.lists(words, max_size=6))
def test_the_command_line(argv, nothing_runs, capsys):
    try:
        code = cli.main(argv)
    except SystemExit as exit:
        code = exit.code
    assert code in (0, 2, None), (argv, code)
    err = capsys.readouterr().err
    assert "Traceback" not in err
