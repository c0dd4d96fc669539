"""Hardware block fused multiply-add (tensor cores), after Fasi et al. (2021) and
Khattak and Mikaitis (2025); the steps are in docs/accumulation.md. With ``round_down``,
AMD CDNA3's two-stage alignment (MMA-Sim's ``tr_fdpa``; docs/hardware-models.md).

``hw`` is a ``fpsim.kernels.spec.BlockSpec``; its ``exp_floor`` is ``NO_EXPONENT``
for no floor.
"""

from fpsim.flags import OVERFLOW
from fpsim.kernels.core import (
    INF,
    MAG,
    NAN,
    NO_EXPONENT,
    bitlen,
    decode,
    is_inf,
    pack,
    round_mag,
)
from fpsim.kernels.prims import f64_bits, maximum, minimum, select


def hw_decode(x, t, emin):
    """``(S, e)`` with |x| = S * 2**(e - t) and e = max(floor(log2|x|), emin).

    Subnormals keep the exponent emin and a significand below 2**t, as the
    hardware reads them. ``x`` must be a finite value of the format.
    """
    sig, e_lsb = decode(f64_bits(x) & MAG, t)
    e = maximum(e_lsb + t, emin)
    return sig >> minimum(e - (e_lsb + t), 63), e


def hw_product(x, y, hw):
    """Integer product of an A input ``x`` and a B input ``y`` (each read in its own
    format), the exponent of its leading position, and that of its last bit."""
    sx, ex = hw_decode(x, hw.t_in, hw.emin_in)
    sy, ey = hw_decode(y, hw.t_in_b, hw.emin_in_b)
    p = sx * sy
    return p, select(p == 0, NO_EXPONENT, ex + ey), ex + ey - hw.t_in - hw.t_in_b


def c_exponent(c, hw):
    """c's exponent as the block reads it (c = 0: none), and at least the floor."""
    unused, ec = hw_decode(c, hw.t_out, hw.emin_out)
    # c is a value of the format: its significand is zero exactly when c is.
    return maximum(select((f64_bits(c) & MAG) == 0, NO_EXPONENT, ec), hw.exp_floor)


def hw_c_exponent(c, hw):
    """The alignment exponent that the accumulator input contributes to the products'
    (and the floor); none under ``round_down``, whose products align among themselves."""
    return select(hw.round_down != 0, NO_EXPONENT, c_exponent(c, hw))


def hw_naive(a, b, hw):
    """A product's share of the block's IEEE sum (a block's result where it has a
    non-finite input), and whether it makes the block non-finite: an infinite or NaN
    input, or under ``round_down`` a product of at least ``product_limit``, which is
    +-inf there (MMA-Sim's ``tr_fdpa``)."""
    p = a * b
    over = (hw.round_down != 0) & (abs(p) >= hw.product_limit)
    return select(over, p * INF, p), is_nonfinite(a) | is_nonfinite(b) | over


def hw_truncate(mag, e_lsb, e_align, frac_bits):
    """floor(mag * 2**e_lsb / 2**(e_align - frac_bits)): a term cut to the block's grid.

    A negative ``mag`` is rounded down (toward -inf): the shifts are arithmetic."""
    shift = e_lsb - (e_align - frac_bits)
    return select(shift >= 0, mag << minimum(maximum(shift, 0), 62),
                  mag >> minimum(maximum(-shift, 0), 63))


def hw_term(x, y, e_align, hw):
    """The product x*y cut to the block's grid, signed, and whether a nonzero one vanished."""
    p, e_top, e_lsb = hw_product(x, y, hw)
    cut = hw_truncate(p, e_lsb, e_align, hw.frac_bits)
    neg = (f64_bits(x) < 0) != (f64_bits(y) < 0)
    return select(neg, -cut, cut), (p != 0) & (cut == 0)


def hw_c_term(c, e_align, hw):
    """The accumulator input cut to the block's grid, signed, and whether it vanished
    (none under ``round_down``, where c joins the sum in ``hw_finish``)."""
    sc, ec = hw_decode(c, hw.t_out, hw.emin_out)
    cut = select(hw.round_down != 0, 0, hw_truncate(sc, ec - hw.t_out, e_align, hw.frac_bits))
    return select(f64_bits(c) < 0, -cut, cut), (sc != 0) & (cut == 0) & (hw.round_down == 0)


def hw_round_down(total, e_dot, c, hw):
    """``round_down``'s second stage: ``(s, e)``, the block's sum ``s * 2**e``.

    The products' sum ``total * 2**(e_dot - frac_bits)`` and c are aligned to E, the
    largest of e_dot, c's exponent and the floor (c = 0 counts at the floor), and rounded
    down (toward -inf): the sum to ``sum_bits + 1`` fraction bits below E, c to
    ``frac_bits``. Their exact sum is rounded down to ``sum_bits`` fraction bits below its
    leading bit, whose exponent counts as at least ``emin_out``.
    """
    sc, ec = hw_decode(c, hw.t_out, hw.emin_out)
    e_top = maximum(e_dot, c_exponent(c, hw))
    g = maximum(hw.sum_bits + 1, hw.frac_bits)  # both terms on the grid 2**(e_top - g)
    dot = hw_truncate(total, e_dot - hw.frac_bits, e_top, hw.sum_bits + 1)
    cut_c = hw_truncate(select(f64_bits(c) < 0, -sc, sc), ec - hw.t_out, e_top, hw.frac_bits)
    s = (dot << (g - hw.sum_bits - 1)) + (cut_c << (g - hw.frac_bits))
    lead = maximum(e_top - g + bitlen(abs(s)) - 1, hw.emin_out)
    return hw_truncate(s, e_top - g, lead, hw.sum_bits), lead - hw.sum_bits


def hw_finish(total, e_align, c, hw, out_spec, want_flags):
    """The block's exact sum rounded once to the output: ``total * 2**(e_align -
    frac_bits)`` (c among its terms), or under ``round_down`` that sum of the products
    and c added as ``hw_round_down`` does."""
    s, e_lsb = total, e_align - hw.frac_bits
    if hw.round_down != 0:
        s, e_lsb = hw_round_down(total, e_align, c, hw)
    neg = s < 0
    a, sticky = pack(abs(s), e_lsb, False)
    v, flags = round_mag(a, sticky, neg, 0, out_spec, True)
    return hw_output(v, flags, neg, hw), select(want_flags, flags, 0)


def hw_output(v, flags, neg, hw):
    """The block's rounded magnitude ``v`` (its rounding's ``flags``), signed as the model
    says: an overflow gives +-inf (``overflow_inf``) and a zero is +0 unless
    ``signed_zero`` keeps the sign of a nonzero sum that rounded to it."""
    v = select((hw.overflow_inf != 0) & ((flags & OVERFLOW) != 0), INF, v)
    return select(neg & ((v != 0) | (hw.signed_zero != 0)), -v, v)


def hw_result(value, naive, nonfinite):
    """A block with an infinite or NaN input gives the IEEE result of its naive sum."""
    return select(nonfinite, select(naive != naive, NAN, naive), value)


def is_nonfinite(x):
    return (x != x) | is_inf(x)
