"""Special functions written in core Triton math, for the ops libdevice lacks or the interpreter
cannot run (libdevice is GPU-only).

Each helper takes and returns float64: float32 and half inputs are computed in float64 and
rounded once. Values computed from loop counters and constexpr parameters are made float64
tensors before use (``tl.zeros_like(x) + c``): Triton evaluates a math function of a constant,
or a constant held in a variable, in float32, so a series or quadrature keeps float32 results exact to rounding, and float64
inputs get float64-grade methods (range reduction plus enough terms, Newton steps, exact
recurrences). A kernel module holds only the helpers its kernels call (``helpers_for``).

Methods, each chosen to be accurate over the whole real line without tables of fitted
coefficients:
* atan: two argument reductions, a half-angle step, then 12 terms of the Taylor series;
  asin, acos and atan2 from it with C's signed-zero and infinity rules.
* erfinv: an initial guess, then Newton steps on ``erf`` (which the interpreter and the GPU
  both have).
* lgamma: the Lanczos approximation (g = 7, nine terms), reflection below 1/2.
* digamma, trigamma, Hurwitz zeta: recurrence up to 10, then the asymptotic (Euler-Maclaurin)
  series; reflection for negative arguments; polygamma(n >= 2) from zeta.
* I0, I1 (and the exponentially scaled forms): the power series (positive terms, no
  cancellation) up to 15, the asymptotic series beyond.
* Chebyshev T, U, V, W (and shifted): closed forms (cos/sin of multiples of acos(x) inside
  [-1, 1], cosh/sinh of multiples of acosh|x| outside); Hermite, Laguerre, Legendre: their
  three-term recurrences, run up to the largest order in the block.
* igamma, igammac: the series of P below x = a + 1, the continued fraction of Q above, each
  iterated until the whole block has converged.
* K0, K1: the power series up to 2; from 2 to 50 the integral of exp(-x cosh t) cosh(nu t)
  by the trapezoid rule (exponentially convergent for this integrand); the asymptotic series
  beyond.
"""
from __future__ import annotations

import re

# name -> (Triton source, helpers it calls)
HELPERS: dict[str, tuple[str, tuple[str, ...]]] = {}


def _helper(name: str, source: str, *deps: str) -> None:
    HELPERS[name] = (source.strip("\n") + "\n", deps)


_helper("_sf_atan_core", '''
@triton.jit
def _sf_atan_core(t):
    # atan of t >= 0 (float64): 1/t above 1, then (u-1)/(u+1) above tan(pi/8), then a half
    # angle; |w| <= tan(pi/16) and 12 Taylor terms leave an error far under float64's epsilon
    inv = t > 1.0
    u = tl.where(inv, 1.0 / t, t)
    big = u > 0.41421356237309503
    v = tl.where(big, (u - 1.0) / (u + 1.0), u)
    w = v / (1.0 + tl.sqrt(1.0 + v * v))
    w2 = w * w
    p = tl.zeros_like(w2) + 1.0 / 23.0
    for k in tl.static_range(10, -1, -1):
        p = p * w2 + (1.0 - 2.0 * (k % 2)) / (2 * k + 1)
    r = 2.0 * w * p
    r = tl.where(big, 0.7853981633974483 + r, r)
    return tl.where(inv, 1.5707963267948966 - r, r)
''')

_helper("_sf_atan", '''
@triton.jit
def _sf_atan(x):
    r = _sf_atan_core(tl.abs(x))
    return tl.where(x == 0, x, tl.where(x < 0, -r, r))
''', "_sf_atan_core")

_helper("_sf_atan2", '''
@triton.jit
def _sf_atan2(y, x):
    # C's atan2: signed zeros pick the half plane, two infinities give odd multiples of pi/4
    ax = tl.abs(x)
    ay = tl.abs(y)
    swap = ay > ax
    num = tl.where(swap, ax, ay)
    den = tl.where(swap, ay, ax)
    t = tl.where(den == 0, 0.0, num / tl.where(den == 0, 1.0, den))
    t = tl.where((ax == float('inf')) & (ay == float('inf')), 1.0, t)
    a = _sf_atan_core(t)
    a = tl.where(swap, 1.5707963267948966 - a, a)
    xneg = (x < 0) | ((x == 0) & ((1.0 / x) < 0))
    a = tl.where(xneg, 3.141592653589793 - a, a)
    yneg = (y < 0) | ((y == 0) & ((1.0 / y) < 0))
    # (a product, not -a: Triton's unary minus is 0 - a, and atan2(-0.0, 2) is -0.0: seed 182441)
    a = tl.where(yneg, a * -1.0, a)
    return tl.where((x != x) | (y != y), x + y, a)
''', "_sf_atan_core")

_helper("_sf_asin", '''
@triton.jit
def _sf_asin(x):
    # (asin(-0.0) is -0.0)
    return tl.where(x == 0, x, _sf_atan2(x, tl.sqrt((1.0 - x) * (1.0 + x))))
''', "_sf_atan2")

_helper("_sf_acos", '''
@triton.jit
def _sf_acos(x):
    return _sf_atan2(tl.sqrt((1.0 - x) * (1.0 + x)), x)
''', "_sf_atan2")

_helper("_sf_erfinv", '''
@triton.jit
def _sf_erfinv(y):
    # a closed-form guess good to ~2e-3 everywhere (Winitzki's, a = 0.147), then Newton on
    # erf: quadratic convergence
    lg = tl.log((1.0 - y) * (1.0 + y))
    t = 4.330746750799873 + 0.5 * lg
    g = tl.sqrt(tl.sqrt(t * t - lg / 0.147) - t) * tl.where(y < 0, -1.0, 1.0)
    for _ in tl.static_range(5):
        g = g - (tl.erf(g) - y) / (1.1283791670955126 * tl.exp(-g * g))
    g = tl.where(tl.abs(y) == 1.0, y * float('inf'), g)
    return tl.where(tl.abs(y) > 1.0, float('nan'), tl.where(y == 0, y, g))
''')

_helper("_sf_lgamma", '''
@triton.jit
def _sf_lgamma(x):
    # Lanczos (g = 7, nine terms) for x >= 1/2; below, the reflection formula
    refl = x < 0.5
    z = tl.where(refl, 1.0 - x, x) - 1.0
    a = (0.99999999999980993 + 676.5203681218851 / (z + 1.0) - 1259.1392167224028 / (z + 2.0)
         + 771.32342877765313 / (z + 3.0) - 176.61502916214059 / (z + 4.0)
         + 12.507343278686905 / (z + 5.0) - 0.13857109526572012 / (z + 6.0)
         + 9.9843695780195716e-6 / (z + 7.0) + 1.5056327351493116e-7 / (z + 8.0))
    t = z + 7.5
    lg = 0.9189385332046727 + (z + 0.5) * tl.log(t) - t + tl.log(a)
    s = tl.abs(tl.sin(3.141592653589793 * (x - 2.0 * tl.floor(0.5 * x))))
    r = tl.where(refl, tl.log(3.141592653589793 / s) - lg, lg)
    r = tl.where((x <= 0) & (x == tl.floor(x)), float('inf'), r)
    # exactly 0 at 1 and 2, as the C library's (the series leaves 1e-16 there, and a test of
    # lgamma(1) == 0 or a logical op of it tips: seed 177158)
    r = tl.where((x == 1.0) | (x == 2.0), 0.0, r)
    return tl.where(tl.abs(x) == float('inf'), float('inf'), r)
''')

_helper("_sf_pi_cot", '''
@triton.jit
def _sf_pi_cot(x):
    # pi / tan(pi x), with x reduced to [0, 1) first so large arguments keep their accuracy
    f = x - tl.floor(x)
    return 3.141592653589793 * tl.cos(3.141592653589793 * f) / tl.sin(3.141592653589793 * f)
''')

_helper("_sf_digamma", '''
@triton.jit
def _sf_digamma(x):
    # psi(x) = psi(x + n) - sum 1/(x + k), x + n >= 10, then the asymptotic series;
    # psi(x) = psi(1 - x) - pi / tan(pi x) below zero. As ATen: psi(+-0) = -+inf, NaN at the
    # negative integers
    z = tl.where(x < 0, 1.0 - x, x)
    acc = tl.zeros_like(z)
    for _ in tl.static_range(10):
        small = z < 10.0
        acc -= tl.where(small, 1.0 / z, 0.0)
        z = tl.where(small, z + 1.0, z)
    r = 1.0 / (z * z)
    s = tl.log(z) - 0.5 / z - r * (1.0 / 12 - r * (1.0 / 120 - r * (1.0 / 252 - r * (
        1.0 / 240 - r * (1.0 / 132)))))
    psi = s + acc
    psi = tl.where(x < 0, psi - _sf_pi_cot(x), psi)
    psi = tl.where(x == 0, tl.where((1.0 / x) < 0, float('inf'), -float('inf')), psi)
    psi = tl.where((x < 0) & (x == tl.floor(x)), float('nan'), psi)
    return tl.where(x == float('inf'), x, psi)
''', "_sf_pi_cot")

_helper("_sf_trigamma", '''
@triton.jit
def _sf_trigamma(x):
    # psi1(x) = psi1(x + n) + sum 1/(x + k)^2, then the asymptotic series; reflection
    # psi1(x) = pi^2 / sin^2(pi x) - psi1(1 - x) below 1/2 (NaN at -inf, 0 at inf)
    refl = x < 0.5
    z = tl.where(refl, 1.0 - x, x)
    acc = tl.zeros_like(z)
    for _ in tl.static_range(10):
        small = z < 10.0
        acc += tl.where(small, 1.0 / (z * z), 0.0)
        z = tl.where(small, z + 1.0, z)
    r = 1.0 / (z * z)
    s = 1.0 / z + 0.5 * r + r / z * (1.0 / 6 - r * (1.0 / 30 - r * (1.0 / 42 - r * (
        1.0 / 30 - r * (5.0 / 66)))))
    p = s + acc
    # sin(pi x) unreduced, as ATen computes it: at the poles a huge value (inf only at 0)
    sn = tl.sin(3.141592653589793 * x)
    return tl.where(refl, 9.869604401089358 / (sn * sn) - p, p)
''')

_helper("_sf_zeta", '''
@triton.jit
def _sf_zeta(s, q):
    # Hurwitz zeta(s, q) = sum (q + k)^-s: the first terms until q + n >= 12 (at most 40),
    # then Euler-Maclaurin with Bernoulli numbers up to B14. ATen's domain rules: s = 1 gives
    # inf, s < 1 NaN; q a non-positive integer inf; q < 0 with s not an integer NaN
    acc = tl.zeros_like(s + q)
    a = q + tl.zeros_like(s)
    for _ in tl.static_range(40):
        small = a < 12.0
        acc += tl.where(small, tl.exp(-s * tl.log(tl.abs(a))) *
                        tl.where((a < 0) & ((s - 2.0 * tl.floor(0.5 * s)) != 0), -1.0, 1.0),
                        0.0)
        a = tl.where(small, a + 1.0, a)
    apow = tl.exp(-s * tl.log(a))           # a^-s
    acc += a * apow / (s - 1.0) + 0.5 * apow
    fact = s * apow / a                      # s a^(-s-1)
    inv2 = 1.0 / (a * a)
    acc += fact * (1.0 / 12.0)
    fact *= (s + 1.0) * (s + 2.0) * inv2
    acc -= fact * (1.0 / 720.0)
    fact *= (s + 3.0) * (s + 4.0) * inv2
    acc += fact * (1.0 / 30240.0)
    fact *= (s + 5.0) * (s + 6.0) * inv2
    acc -= fact * (1.0 / 1209600.0)
    fact *= (s + 7.0) * (s + 8.0) * inv2
    acc += fact * (1.0 / 47900160.0)
    fact *= (s + 9.0) * (s + 10.0) * inv2
    acc -= fact * (691.0 / 1307674368000.0)
    fact *= (s + 11.0) * (s + 12.0) * inv2
    acc += fact * (1.0 / 74724249600.0)
    r = tl.where(s == 1.0, float('inf'), tl.where(s < 1.0, float('nan'), acc))
    qint = q == tl.floor(q)
    r = tl.where((q <= 0) & qint & (s > 1.0), float('inf'), r)
    r = tl.where((q < 0) & ~qint & (s != tl.floor(s)), float('nan'), r)
    return tl.where((s != s) | (q != q), s + q, r)
''')

# Bessel functions of the first and second kind, modified (I, K), orders 0 and 1.
_helper("_sf_bessel_i_series", '''
@triton.jit
def _sf_bessel_i_series(x, NU: tl.constexpr):
    # sum (x/2)^(2k+nu) / (k! (k+nu)!): positive terms, 48 of them cover |x| <= 15
    h = 0.25 * x * x
    term = tl.zeros_like(x) + 1.0
    if NU == 1:
        term = 0.5 * x
    acc = term
    for k in tl.static_range(1, 48):
        term = term * h / (k * (k + NU))
        acc += term
    return acc
''')

_helper("_sf_bessel_asym", '''
@triton.jit
def _sf_bessel_asym(x, NU: tl.constexpr, SIGN: tl.constexpr):
    # sum a_k(nu) / x^k, a_k = prod (4nu^2 - (2j-1)^2) / (k! 8^k): SIGN -1 for I (alternating),
    # +1 for K; 24 terms, used where the smallest term is far below float64's epsilon
    mu = tl.zeros_like(x) + 4.0 * NU * NU
    term = tl.zeros_like(x) + 1.0
    acc = term
    for k in tl.static_range(1, 24):
        term = term * (mu - (2 * k - 1) * (2 * k - 1)) / (8.0 * k * x) * SIGN
        acc += term
    return acc
''')

_helper("_sf_bessel_k_large", '''
@triton.jit
def _sf_bessel_k_large(x, NU: tl.constexpr, SCALED: tl.constexpr):
    # K_nu(x) for x > 2, any order nu (SCALED: times exp(x)): up to 50 the integral of
    # exp(-x (cosh t - 1)) cosh(nu t) by the trapezoid rule with step 0.1 to t = 6
    # (exponentially convergent for this integrand); beyond, the asymptotic series
    xm = tl.where(x <= 50.0, x, 10.0)
    quad = tl.zeros_like(xm) + 0.5                # the t = 0 point, weight 1/2
    for j in tl.static_range(1, 61):
        t = tl.zeros_like(xm) + 0.1 * j           # a float64 tensor: exp of a constant is float32
        quad += tl.exp(-xm * (0.5 * (tl.exp(t) + tl.exp(-t)) - 1.0)) * 0.5 * (
            tl.exp(t * NU) + tl.exp(-(t * NU)))
    quad = quad * 0.1
    xb = tl.where(x > 50.0, x, 100.0)
    asym = _sf_bessel_asym(xb, NU, 1.0) * tl.sqrt(1.5707963267948966 / xb)
    if not SCALED:
        quad = quad * tl.exp(-xm)
        asym = asym * tl.exp(-xb)
    return tl.where(x <= 50.0, quad, asym)
''', "_sf_bessel_asym")

_helper("_sf_bessel_i", '''
@triton.jit
def _sf_bessel_i(x, NU: tl.constexpr, SCALED: tl.constexpr):
    # I_nu(x) (SCALED: times exp(-|x|)); I0 is even, I1 odd
    ax = tl.abs(x)
    small = ax <= 15.0
    series = _sf_bessel_i_series(tl.where(small, ax, 1.0), NU)
    if SCALED:
        series = series * tl.exp(-ax)
    big = tl.where(small, 20.0, ax)
    asym = _sf_bessel_asym(big, NU, -1.0) / tl.sqrt(6.283185307179586 * big)
    if not SCALED:
        asym = asym * tl.exp(big)
    r = tl.where(small, series, asym)
    if NU == 1:
        r = tl.where(x < 0, -r, r)
    return tl.where(x != x, x, r)
''', "_sf_bessel_i_series", "_sf_bessel_asym")

_helper("_sf_bessel_k", '''
@triton.jit
def _sf_bessel_k(x, NU: tl.constexpr, SCALED: tl.constexpr):
    # K_nu(x), x > 0 (SCALED: times exp(x)). x <= 2: the series with log(x/2) I_nu(x);
    # beyond, _sf_bessel_k_large. 0 gives inf, x < 0 NaN
    xs = tl.where(x <= 2.0, tl.maximum(x, 1e-300), 1.0)
    h = 0.25 * xs * xs
    lg = tl.log(0.5 * xs) + 0.5772156649015329
    if NU == 0:
        term = tl.zeros_like(xs) + 1.0
        harm = tl.zeros_like(xs)
        acc = -lg
        for k in tl.static_range(1, 30):
            term = term * h / (k * k)
            harm += 1.0 / k
            acc += term * (harm - lg)
        series = acc
    else:
        # K1 = 1/x + I1(x) log(x/2) - (x/4) sum (x^2/4)^k (psi(k+1) + psi(k+2)) / (k!(k+1)!)
        term = tl.zeros_like(xs) + 1.0
        psum = tl.zeros_like(xs) - 2.0 * 0.5772156649015329 + 1.0
        acc = term * psum
        harm = tl.zeros_like(xs)
        for k in tl.static_range(1, 30):
            term = term * h / (k * (k + 1))
            harm += 1.0 / k
            psum = 2.0 * harm - 2.0 * 0.5772156649015329 + 1.0 / (k + 1)
            acc += term * psum
        series = 1.0 / xs + _sf_bessel_i_series(xs, 1) * tl.log(0.5 * xs) - 0.25 * xs * acc
    if SCALED:
        series = series * tl.exp(xs)
    large = _sf_bessel_k_large(tl.where(x > 2.0, x, 3.0), NU, SCALED)
    r = tl.where(x <= 2.0, series, large)
    r = tl.where(x == 0, float('inf'), r)
    r = tl.where(x < 0, float('nan'), r)
    r = tl.where(x == float('inf'), 0.0, r)
    return tl.where(x != x, x, r)
''', "_sf_bessel_i_series", "_sf_bessel_k_large")

_helper("_sf_spherical_j0", '''
@triton.jit
def _sf_spherical_j0(x):
    # sin(x) / x; near 0 its series (the quotient loses digits there)
    x2 = x * x
    near = 1.0 - x2 / 6.0 * (1.0 - x2 / 20.0 * (1.0 - x2 / 42.0 * (1.0 - x2 / 72.0)))
    r = tl.where(tl.abs(x) < 0.5, near, tl.sin(x) / tl.where(x == 0, 1.0, x))
    return tl.where(tl.abs(x) == float('inf'), 0.0, r)
''')

_helper("_sf_erfcx", '''
@triton.jit
def _sf_erfcx(x):
    # exp(x^2) erfc(x): directly while erfc has digits (x < 2); beyond, the continued
    # fraction of erfc, evaluated from the tail (40 levels); below -26 it overflows
    direct = tl.exp(x * x) * (1.0 - tl.erf(x))
    xb = tl.where(x >= 2.0, x, 2.0)
    f = tl.zeros_like(xb)
    for k in tl.static_range(40, 0, -1):
        f = (0.5 * k) / (xb + f)
    cf = 0.5641895835477563 / (xb + f)
    r = tl.where(x >= 2.0, cf, direct)
    return tl.where(x == float('inf'), 0.0, r)
''')

_helper("_sf_log_ndtr", '''
@triton.jit
def _sf_log_ndtr(x):
    # log(Phi(x)) = log(erfc(-x / sqrt 2) / 2): through erfcx in the lower tail, log1p of the
    # small complement in the upper
    t = -x * 0.7071067811865476
    lower = tl.log(0.5 * _sf_erfcx(t)) - t * t
    upper = tl.log(1.0 - 0.5 * (1.0 - tl.erf(x * 0.7071067811865476)))
    return tl.where(x < -1.0, lower, upper)
''', "_sf_erfcx")

_helper("_sf_ndtri", '''
@triton.jit
def _sf_ndtri(p):
    # the inverse of Phi: sqrt(2) erfinv(2p - 1) in the middle; in the lower tail Newton on
    # log Phi (2p - 1 would lose the digits of a small p); the upper tail by symmetry
    mid = 1.4142135623730951 * _sf_erfinv(2.0 * p - 1.0)
    q = tl.minimum(p, 1.0 - p)
    lq = tl.log(tl.maximum(q, 1e-300))
    g = -tl.sqrt(-2.0 * lq)
    g = g - (tl.log(-g) + 0.9189385332046727) / g   # Phi(g) ~ phi(g) / |g| in the tail
    for _ in tl.static_range(8):
        lphi = _sf_log_ndtr(g)
        g = g - (lphi - lq) * tl.exp(lphi + 0.5 * g * g + 0.9189385332046727)
    tail = tl.where(p < 0.5, g, -g)
    r = tl.where((q < 0.05), tail, mid)
    r = tl.where(p == 0, -float('inf'), tl.where(p == 1, float('inf'), r))
    return tl.where((p < 0) | (p > 1) | (p != p), float('nan'), r)
''', "_sf_erfinv", "_sf_log_ndtr")


# Orthogonal polynomials of a per-element order n, with ATen's conventions: n is truncated to
# an integer (NaN and infinities count as negative), a negative order gives 0, order 0 gives 1
# whatever x is, and the values at the ends of the interval are exact.
_helper("_sf_order", """
@triton.jit
def _sf_order(n):
    t = tl.where(n >= 0, tl.floor(n), tl.ceil(n))
    return tl.where(tl.abs(n) < float('inf'), t, -1.0)
""")

_helper("_sf_chebyshev", """
@triton.jit
def _sf_chebyshev(x, n, KIND: tl.constexpr):
    # Chebyshev T (KIND 0), U (1), V (2), W (3) in closed form: x = cos(th) inside [-1, 1],
    # x = +-cosh(a) outside (no recurrence, so any order costs the same)
    n = _sf_order(n)
    odd = (n - 2.0 * tl.floor(0.5 * n)) != 0
    neg = x < 0
    sgn = tl.where(neg & odd, -1.0, 1.0)
    ax = tl.abs(x)
    th = _sf_acos(tl.minimum(tl.maximum(x, -1.0), 1.0))
    a = tl.log(ax + tl.sqrt((ax - 1.0) * (ax + 1.0)))
    ea = tl.exp(a)
    if KIND == 0:
        inside = tl.cos(n * th)
        outside = sgn * 0.5 * (tl.exp(n * a) + tl.exp(-n * a))
        ends = tl.where(~neg | ~odd, 1.0, -1.0)
        first = x
    elif KIND == 1:
        s = tl.sin(th)
        inside = tl.where(s != 0, tl.sin((n + 1.0) * th) / s,
                          (n + 1.0) * tl.cos((n + 1.0) * th) / x)
        outside = sgn * (tl.exp((n + 1.0) * a) - tl.exp(-(n + 1.0) * a)) / (ea - 1.0 / ea)
        ends = tl.where(~neg | ~odd, n + 1.0, -(n + 1.0))
        first = x + x
    else:
        ch = (tl.exp((n + 0.5) * a) + tl.exp(-(n + 0.5) * a)) / (tl.exp(0.5 * a) + tl.exp(-0.5 * a))
        sh = (tl.exp((n + 0.5) * a) - tl.exp(-(n + 0.5) * a)) / (tl.exp(0.5 * a) - tl.exp(-0.5 * a))
        if KIND == 2:
            inside = tl.cos((n + 0.5) * th) / tl.cos(0.5 * th)
            outside = tl.where(neg, sgn * sh, ch)
            ends = tl.where(~neg, 1.0, tl.where(odd, -(n + n + 1.0), n + n + 1.0))
            first = x + x - 1.0
        else:
            inside = tl.sin((n + 0.5) * th) / tl.sin(0.5 * th)
            outside = tl.where(neg, sgn * ch, sh)
            ends = tl.where(~neg, n + n + 1.0, tl.where(odd, -1.0, 1.0))
            first = x + x + 1.0
    r = tl.where(ax < 1.0, inside, outside)
    r = tl.where(ax == 1.0, ends, r)
    r = tl.where(n == 1, first, r)
    r = tl.where(n == 0, 1.0, r)
    return tl.where(n < 0, 0.0, r)
""", "_sf_order", "_sf_acos")

_helper("_sf_three_term", """
@triton.jit
def _sf_three_term(x, n, KIND: tl.constexpr):
    # Hermite H (KIND 0), Hermite He (1), Laguerre (2), Legendre (3) by their recurrences, up
    # to the largest order in the block (lanes past their own order keep their value)
    top = tl.max(tl.where(n > 0, n, 0.0))
    p = tl.zeros_like(x) + 1.0
    if KIND == 0:
        q = x + x
    elif KIND == 2:
        q = 1.0 - x
    else:
        q = x
    k = top * 0.0 + 1.0
    while k < top:
        live = k < n
        if KIND == 0:
            r = 2.0 * x * q - 2.0 * k * p
        elif KIND == 1:
            r = x * q - k * p
        elif KIND == 2:
            r = ((k + k + 1.0 - x) * q - k * p) / (k + 1.0)
        else:
            r = ((k + k + 1.0) * x * q - k * p) / (k + 1.0)
        p = tl.where(live, q, p)
        q = tl.where(live, r, q)
        k += 1.0
    return tl.where(n == 0, 1.0, q)
""")

_helper("_sf_hermite", """
@triton.jit
def _sf_hermite(x, n, limit, KIND: tl.constexpr):
    # ATen gives NaN above an order limit that depends on the dtype (128 for float32)
    n = _sf_order(n)
    r = _sf_three_term(x, tl.where(n > limit, 0.0, n), KIND)
    r = tl.where(n > limit, float('nan'), r)
    return tl.where(n < 0, 0.0, r)
""", "_sf_order", "_sf_three_term")

_helper("_sf_laguerre", """
@triton.jit
def _sf_laguerre(x, n):
    n = _sf_order(n)
    r = tl.where(x == 0, 1.0, _sf_three_term(x, n, 2))
    return tl.where(n < 0, 0.0, r)
""", "_sf_order", "_sf_three_term")

_helper("_sf_legendre", """
@triton.jit
def _sf_legendre(x, n):
    n = _sf_order(n)
    odd = (n - 2.0 * tl.floor(0.5 * n)) != 0
    r = _sf_three_term(x, n, 3)
    r = tl.where(tl.abs(x) == 1.0, tl.where((x > 0) | ~odd, 1.0, -1.0), r)
    return tl.where(n < 0, 0.0, r)
""", "_sf_order", "_sf_three_term")


# frexp: x = mantissa * 2^exponent with |mantissa| in [1/2, 1), from the bit pattern (exact).
# Zeros, infinities and NaN come back as they are with exponent 0, as ATen's; subnormals are
# first scaled into the normal range.
_helper("_sf_frexp_f32", """
@triton.jit
def _sf_frexp_f32(x):
    sub = (tl.abs(x) < 1.1754943508222875e-38) & (x != 0)
    y = tl.where(sub, x * 18446744073709551616.0, x)       # * 2^64, exact
    b = y.to(tl.int32, bitcast=True)
    e = ((b >> 23) & 0xFF) - 126 - tl.where(sub, 64, 0)
    m = ((b & -2139095041) | 1056964608).to(tl.float32, bitcast=True)  # 0x807FFFFF, 0x3F000000
    special = (x == 0) | (tl.abs(x) == float('inf')) | (x != x)
    return tl.where(special, x, m), tl.where(special, 0, e)
""")

_helper("_sf_frexp_f64", """
@triton.jit
def _sf_frexp_f64(x):
    sub = (tl.abs(x) < 2.2250738585072014e-308) & (x != 0)
    y = tl.where(sub, x * 18446744073709551616.0, x)
    b = y.to(tl.int64, bitcast=True)
    e = (((b >> 52) & 0x7FF) - 1022 - tl.where(sub, 64, 0)).to(tl.int32)
    m = ((b & -9218868437227405313) | 4602678819172646912).to(tl.float64, bitcast=True)
    special = (x == 0) | (tl.abs(x) == float('inf')) | (x != x)
    return tl.where(special, x, m), tl.where(special, 0, e)
""")


# Bessel functions of the first and second kind, orders 0 and 1 (the GPU calls libdevice's
# j0/j1/y0/y1; these run everywhere, the interpreter included).
def _gauss_legendre(n: int) -> list[tuple[float, float]]:
    """Nodes and weights of n-point Gauss-Legendre quadrature on [-1, 1] (Newton on P_n)."""
    import math
    out = []
    for i in range(1, n + 1):
        z = math.cos(math.pi * (i - 0.25) / (n + 0.5))
        for _ in range(100):
            p0, p1 = 1.0, z
            for k in range(2, n + 1):
                p0, p1 = p1, ((2 * k - 1) * z * p1 - (k - 1) * p0) / k
            dp = n * (z * p1 - p0) / (z * z - 1.0)
            step = p1 / dp
            z -= step
            if abs(step) < 1e-16:
                break
        out.append((z, 2.0 / ((1.0 - z * z) * dp * dp)))
    return out


def _bessel_y_integral_source() -> str:
    """Y_nu(x) = (1/pi) int_0^pi sin(x sin t - nu t) dt
                 - (1/pi) int_0^inf (e^(nu t) + (-1)^nu e^(-nu t)) e^(-x sinh t) dt,
    both by 48-point Gauss-Legendre (the second on [0, 4]: for x > 8 the rest is below
    e^-200), unrolled with the nodes as constants."""
    import math
    lines = ["@triton.jit", "def _sf_bessel_y_integral(x, NU: tl.constexpr):",
             "    a = tl.zeros_like(x)", "    b = tl.zeros_like(x)", "    z = tl.zeros_like(x)"]
    for u, w in _gauss_legendre(48):
        t = 0.5 * math.pi * (u + 1.0)
        lines.append(f"    a += {0.5 * math.pi * w!r} * tl.sin(x * {math.sin(t)!r} - NU * {t!r})")
    for u, w in _gauss_legendre(48):
        t = 2.0 * (u + 1.0)
        lines.append(f"    b += (tl.exp(z + NU * {t!r}) + tl.exp(z - NU * {t!r}) * (1.0 - 2.0 * NU))"
                     f" * tl.exp(x * {-math.sinh(t)!r}) * {2.0 * w!r}")
    lines.append("    return (a - b) * 0.3183098861837907")
    return "\n".join(lines) + "\n"


_helper("_sf_bessel_y_integral", _bessel_y_integral_source())

_helper("_sf_hankel", """
@triton.jit
def _sf_hankel(x, NU: tl.constexpr, SECOND: tl.constexpr):
    # x > 25: sqrt(2 / (pi x)) (P cos(chi) - Q sin(chi)) for J, (P sin(chi) + Q cos(chi)) for
    # Y, chi = x - (nu / 2 + 1 / 4) pi; 23 terms of P and Q leave under 1e-15
    mu = 4.0 * NU * NU
    t = tl.zeros_like(x) + 1.0
    p = t
    q = tl.zeros_like(x)
    for k in tl.static_range(1, 24):
        t = t * (mu - (2 * k - 1) * (2 * k - 1)) / (8.0 * k * x)
        if k % 2 == 1:
            q += t * (1.0 - 2.0 * (((k - 1) // 2) % 2))
        else:
            p += t * (1.0 - 2.0 * ((k // 2) % 2))
    chi = x - (0.5 * NU + 0.25) * 3.141592653589793
    amp = tl.sqrt(0.6366197723675814 / x)
    if SECOND:
        return amp * (p * tl.sin(chi) + q * tl.cos(chi))
    return amp * (p * tl.cos(chi) - q * tl.sin(chi))
""")

_helper("_sf_bessel_j", """
@triton.jit
def _sf_bessel_j(x, NU: tl.constexpr):
    # |x| <= 25: J_nu(x) = (1/2pi) int_0^2pi cos(nu t - x sin t) dt, a periodic integrand, so
    # the trapezoid rule with 64 points is exact to far under float64's epsilon; beyond, Hankel
    ax = tl.abs(x)
    xs = tl.where(ax <= 25.0, ax, 0.0)
    acc = tl.zeros_like(x) + (2.0 - 2.0 * NU)          # t = 0 and t = pi: 1 + (-1)^nu
    for j in tl.static_range(1, 32):
        t = tl.zeros_like(x) + 0.09817477042468103 * j   # 2 pi j / 64, as a float64 tensor
        acc += 2.0 * tl.cos(t * NU - xs * tl.sin(t))
    r = tl.where(ax <= 25.0, acc * 0.015625, _sf_hankel(tl.where(ax > 25.0, ax, 30.0), NU, False))
    if NU == 1:
        r = tl.where(x < 0, -r, r)
    return tl.where((ax == float('inf')) | (x != x), float('nan'), r)   # as ATen at inf
""", "_sf_hankel")

_helper("_sf_bessel_y", """
@triton.jit
def _sf_bessel_y(x, NU: tl.constexpr):
    # x <= 8: the series with log(x / 2) J_nu(x); 8 < x <= 25: the integral representation;
    # beyond: Hankel. 0 gives -inf, x < 0 and inf NaN (as ATen)
    xs = tl.where(x <= 8.0, tl.maximum(x, 1e-300), 1.0)
    h = -0.25 * xs * xs
    lg = tl.log(0.5 * xs)
    term = tl.zeros_like(xs) + 1.0
    harm = tl.zeros_like(xs)
    if NU == 0:
        acc = tl.zeros_like(xs)
        for k in tl.static_range(1, 34):
            term = term * h / (k * k)
            harm += 1.0 / k
            acc -= term * harm
        series = 0.6366197723675814 * ((lg + 0.5772156649015329) * _sf_bessel_j(xs, 0) + acc)
    else:
        psum = tl.zeros_like(xs) + 1.0 - 2.0 * 0.5772156649015329
        acc = psum
        for k in tl.static_range(1, 34):
            term = term * h / (k * (k + 1))
            harm += 1.0 / k
            acc += term * (2.0 * harm - 2.0 * 0.5772156649015329 + 1.0 / (k + 1))
        series = (0.6366197723675814 * lg * _sf_bessel_j(xs, 1) - 0.6366197723675814 / xs
                  - 0.15915494309189535 * xs * acc)
    mid = _sf_bessel_y_integral(tl.where((x > 8.0) & (x <= 25.0), x, 10.0), NU)
    far = _sf_hankel(tl.where(x > 25.0, x, 30.0), NU, True)
    r = tl.where(x <= 8.0, series, tl.where(x <= 25.0, mid, far))
    r = tl.where(x == 0, -float('inf'), r)
    return tl.where((x < 0) | (x == float('inf')) | (x != x), float('nan'), r)
""", "_sf_bessel_j", "_sf_bessel_y_integral", "_sf_hankel")


# nextafter: the neighbour of x towards y in the bit pattern, on every device. All in integers:
# the GPU flushes float32 subnormals in comparisons and in libdevice's nextafterf (the step from
# 0 gave 1.2e-38, not 1.4e-45, on the H200), so x and y are compared as ordered keys (the bit
# pattern for x >= +0, MIN - bits below: -0 and +0 share key 0) and the result is built as bits.
# One body for both widths, the integer type and its minimum filled in.
_NEXTAFTER = """
@triton.jit
def _sf_nextafter_f{bits}(x, y):
    bx = x.to(tl.int{bits}, bitcast=True)
    by = y.to(tl.int{bits}, bitcast=True)
    kx = tl.where(bx >= 0, bx, {imin} - bx)
    ky = tl.where(by >= 0, by, {imin} - by)
    kn = tl.where(ky > kx, kx + 1, kx - 1)
    n = tl.where(kn >= 0, kn, {imin} - kn)
    n = tl.where(kn == 0, bx & {imin}, n)   # a step onto zero keeps x's sign, as C's does
    r = tl.where(kx == ky, y, n.to(tl.float{bits}, bitcast=True))
    return tl.where((x != x) | (y != y), x + y, r)
"""
for _bits in (32, 64):
    _helper(f"_sf_nextafter_f{_bits}", _NEXTAFTER.format(bits=_bits, imin=-(2**(_bits - 1))))


# Regularized incomplete gamma P(a, x) (igamma) and Q(a, x) = 1 - P (igammac): the power series
# of P below x = a + 1, the continued fraction of Q above (modified Lentz), each iterated until
# every lane of the block has converged. ATen's rules at the edges of the domain.
_helper("_sf_igamma_pq", """
@triton.jit
def _sf_igamma_pq(a, x, UPPER: tl.constexpr):
    valid = (a > 0) & (x > 0) & (a < float('inf')) & (x < float('inf'))
    a_ = tl.where(valid, a, 1.0)
    x_ = tl.where(valid, x, 1.0)
    lead = tl.exp(a_ * tl.log(x_) - x_ - _sf_lgamma(a_))      # x^a e^-x / Gamma(a)
    series = x_ < a_ + 1.0
    # P = lead * sum_n x^n / (a (a + 1) ... (a + n))
    term = 1.0 / a_
    total = term
    ap = a_
    go = series
    more = tl.max(go.to(tl.int32)) > 0
    while more:
        ap = ap + 1.0
        term = tl.where(go, term * x_ / ap, term)
        total = tl.where(go, total + term, total)
        go = go & (term > total * 1e-17)
        more = tl.max(go.to(tl.int32)) > 0
    p_series = total * lead
    # Q = lead * 1 / (x + 1 - a - 1 (1 - a) / (x + 3 - a - 2 (2 - a) / (x + 5 - a - ...)))
    b = x_ + 1.0 - a_
    c = tl.zeros_like(b) + 1e300
    d = 1.0 / tl.where(b == 0, 1e-300, b)
    h = d
    i = tl.zeros_like(b)
    go = ~series
    more = tl.max(go.to(tl.int32)) > 0
    while more:
        i = i + 1.0
        an = -i * (i - a_)
        b = b + 2.0
        d = an * d + b
        d = 1.0 / tl.where(tl.abs(d) < 1e-300, 1e-300, d)
        c = b + an / c
        c = tl.where(tl.abs(c) < 1e-300, 1e-300, c)
        step = d * c
        h = tl.where(go, h * step, h)
        go = go & (tl.abs(step - 1.0) > 1e-16)
        more = tl.max(go.to(tl.int32)) > 0
    q_cf = lead * h
    if UPPER:
        r = tl.where(series, 1.0 - p_series, q_cf)
        r = tl.where(x == 0, 1.0, r)
        r = tl.where(x == float('inf'), 0.0, r)
        r = tl.where(a == float('inf'), tl.where(x == float('inf'), float('nan'), 1.0), r)
        r = tl.where(a == 0, tl.where(x > 0, 0.0, float('nan')), r)
    else:
        r = tl.where(series, p_series, 1.0 - q_cf)
        r = tl.where(x == 0, 0.0, r)
        r = tl.where(x == float('inf'), 1.0, r)
        r = tl.where(a == float('inf'), tl.where(x == float('inf'), float('nan'), 0.0), r)
        r = tl.where(a == 0, tl.where(x > 0, 1.0, float('nan')), r)
    return tl.where((a < 0) | (x < 0) | (a != a) | (x != x), float('nan'), r)
""", "_sf_lgamma")


_helper("_sf_airy_ai", """
@triton.jit
def _sf_airy_ai(x):
    # -8 <= x <= 2: the Maclaurin series Ai(0) f(x) + Ai'(0) g(x); x > 2:
    # sqrt(x / 3) K_{1/3}(z) / pi with z = 2/3 x^(3/2) (_sf_bessel_k_large); x < -8: the
    # oscillating asymptotic series. NaN at the infinities and NaN, as ATen
    xs = tl.where((x >= -8.0) & (x <= 2.0), x, 0.0)
    x3 = xs * xs * xs
    f = tl.zeros_like(xs) + 1.0
    g = xs
    tf = f
    tg = g
    kf = tl.zeros_like(xs)
    for _ in tl.static_range(40):
        kf += 3.0
        tf = tf * x3 / ((kf - 1.0) * kf)
        tg = tg * x3 / (kf * (kf + 1.0))
        f += tf
        g += tg
    series = 0.3550280538878172 * f - 0.2588194037928068 * g
    # x > 2
    xp = tl.where(x > 2.0, x, 3.0)
    z = 0.6666666666666666 * xp * tl.sqrt(xp)
    right = tl.sqrt(xp * 0.3333333333333333) * 0.3183098861837907 * _sf_bessel_k_large(
        z, 0.3333333333333333, False)
    # x < -8
    xn = tl.where(x < -8.0, -x, 9.0)
    zn = 0.6666666666666666 * xn * tl.sqrt(xn)
    c = tl.zeros_like(zn) + 1.0
    p = c
    q = tl.zeros_like(zn)
    zk = tl.zeros_like(zn) + 1.0
    kn = tl.zeros_like(zn)
    for i in tl.static_range(1, 25):
        kn += 1.0
        c = c * (6.0 * kn - 1.0) * (6.0 * kn - 3.0) * (6.0 * kn - 5.0) / (216.0 * kn * (2.0 * kn - 1.0))
        zk = zk * zn
        if i % 4 == 1:
            q += c / zk
        elif i % 4 == 2:
            p -= c / zk
        elif i % 4 == 3:
            q -= c / zk
        else:
            p += c / zk
    ph = zn + 0.7853981633974483
    left = (tl.sin(ph) * p - tl.cos(ph) * q) * 0.5641895835477563 / tl.sqrt(tl.sqrt(xn))
    r = tl.where(x > 2.0, right, tl.where(x < -8.0, left, series))
    return tl.where((tl.abs(x) == float('inf')) | (x != x), float('nan'), r)
""", "_sf_bessel_k_large")


# the entry points the scalar-op table names (one argument each; orders and scaling fixed)
for _name, _call in [("_sf_i0", "_sf_bessel_i(x, 0, False)"), ("_sf_i0e", "_sf_bessel_i(x, 0, True)"),
                     ("_sf_i1", "_sf_bessel_i(x, 1, False)"), ("_sf_i1e", "_sf_bessel_i(x, 1, True)"),
                     ("_sf_k0", "_sf_bessel_k(x, 0, False)"), ("_sf_k0e", "_sf_bessel_k(x, 0, True)"),
                     ("_sf_k1", "_sf_bessel_k(x, 1, False)"), ("_sf_k1e", "_sf_bessel_k(x, 1, True)"),
                     ("_sf_j0", "_sf_bessel_j(x, 0)"), ("_sf_j1", "_sf_bessel_j(x, 1)"),
                     ("_sf_y0", "_sf_bessel_y(x, 0)"), ("_sf_y1", "_sf_bessel_y(x, 1)")]:
    _helper(_name, f"@triton.jit\ndef {_name}(x):\n    return {_call}\n", _call.split("(")[0])
for _name, _upper in [("_sf_igamma", False), ("_sf_igammac", True)]:
    _helper(_name, f"@triton.jit\ndef {_name}(a, x):\n    return _sf_igamma_pq(a, x, {_upper})\n",
            "_sf_igamma_pq")
for _name, _call in [("_sf_cheb_t", "_sf_chebyshev(x, n, 0)"), ("_sf_cheb_u", "_sf_chebyshev(x, n, 1)"),
                     ("_sf_cheb_v", "_sf_chebyshev(x, n, 2)"), ("_sf_cheb_w", "_sf_chebyshev(x, n, 3)"),
                     ("_sf_shifted_cheb_t", "_sf_chebyshev(x + x - 1.0, n, 0)"),
                     ("_sf_shifted_cheb_u", "_sf_chebyshev(x + x - 1.0, n, 1)"),
                     ("_sf_shifted_cheb_v", "_sf_chebyshev(x + x - 1.0, n, 2)"),
                     ("_sf_shifted_cheb_w", "_sf_chebyshev(x + x - 1.0, n, 3)"),
                     ("_sf_hermite_h", "_sf_hermite(x, n, limit, 0)"),
                     ("_sf_hermite_he", "_sf_hermite(x, n, limit, 1)")]:
    _args = "x, n, limit" if "limit" in _call else "x, n"
    _helper(_name, f"@triton.jit\ndef {_name}({_args}):\n    return {_call}\n",
            _call.split("(")[0])


def helpers_for(source: str) -> str:
    """The helpers a module's kernels call, each after the helpers it calls."""
    wanted: list[str] = []
    for name in sorted(set(re.findall(r"\b(_sf_\w+)\(", source))):
        if name in HELPERS:
            _need(name, wanted)
    return "".join("\n" + HELPERS[n][0] for n in wanted)


def _need(name: str, wanted: list) -> None:
    """``name`` appended to ``wanted`` after the helpers it calls, each once."""
    if name in wanted:
        return
    for dep in HELPERS[name][1]:
        _need(dep, wanted)
    wanted.append(name)
