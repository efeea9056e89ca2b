"""Statistical and structural tests of the fast exact samplers (privmob.privacy.exact_noise).

Every goodness-of-fit test rejects at p < 1e-3. The samplers' random words come from
os.urandom; in the fit tests (the ``seeded`` fixture) they come from a seeded generator
instead, so those draws are reproducible and the tests cannot fail by chance (the samplers'
arithmetic on the words is what is tested; where the words come from is
``test_random_words_come_from_the_os``). The comparison with OpenDP draws OpenDP's own secure
noise: its false-failure rate is 1e-3. Each fit test also checks its own power: the same sample
must be rejected (p < 1e-6) against the law with the scale 10% off, so a sampler whose scale
is off by 10% (let alone 2x) fails.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from privmob.errors import ConfigError
from privmob.privacy import exact_noise, samplers

N = 200_000
ALPHA = 1e-3


@pytest.fixture
def seeded(monkeypatch: pytest.MonkeyPatch) -> None:
    """The samplers' random words from a seeded generator (reproducible draws)."""
    gen = np.random.default_rng(20261124)
    monkeypatch.setattr(
        exact_noise, "random_words", lambda n: gen.integers(0, 2**64, n, dtype=np.uint64)
    )
    monkeypatch.setattr(exact_noise, "_word", lambda: int(gen.integers(0, 2**64, dtype=np.uint64)))


def laplace_pmf(z: np.ndarray, b: float) -> np.ndarray:
    q = math.exp(-1.0 / b)
    return (1 - q) / (1 + q) * q ** np.abs(z)


def gaussian_pmf(z: np.ndarray, sigma: float) -> np.ndarray:
    support = np.arange(-int(60 * sigma) - 20, int(60 * sigma) + 21)
    norm = np.exp(-(support.astype(float) ** 2) / (2 * sigma**2)).sum()
    return np.exp(-(z.astype(float) ** 2) / (2 * sigma**2)) / norm


def chi2_pvalue(sample: np.ndarray, pmf, min_expected: float = 20.0) -> float:
    """Chi-square goodness of fit; cells with small expectation are pooled into two tails."""
    n = sample.size
    lo, hi = int(sample.min()) - 1, int(sample.max()) + 1
    span = max(abs(lo), abs(hi)) * 4 + 50
    z = np.arange(-span, span + 1)
    expected = n * pmf(z)
    core = np.flatnonzero(expected >= min_expected)
    zmin, zmax = z[core[0]], z[core[-1]]
    counts = np.bincount(np.clip(sample, zmin - 1, zmax + 1) - (zmin - 1))
    counts = np.pad(counts, (0, (zmax - zmin + 3) - counts.size))
    exp_core = expected[core[0] : core[-1] + 1]
    exp_left = expected[: core[0]].sum()
    exp_right = n - exp_core.sum() - exp_left
    obs = counts.astype(float)
    exp = np.concatenate([[exp_left], exp_core, [exp_right]])
    keep = exp > 0
    # the pmf tails beyond the grid are < 1e-300: rescale tiny normalisation drift
    exp = exp[keep] * (obs[keep].sum() / exp[keep].sum())
    return float(stats.chisquare(obs[keep], exp).pvalue)


@pytest.mark.parametrize(
    ("kind", "scale"),
    [("laplace", b) for b in (0.3, 0.7, 3.0, 25.0, 1234.5)]
    + [("gaussian", sigma) for sigma in (0.4, 1.0, 4.5, 40.0)],
)
@pytest.mark.usefixtures("seeded")
def test_discrete_noise_matches_exact_pmf(kind: str, scale: float) -> None:
    """The discrete Laplace (scale b) and Gaussian (sigma) samples follow their exact pmf, and
    not the pmf of a scale 10% off or twice as large."""
    pmf = {"laplace": laplace_pmf, "gaussian": gaussian_pmf}[kind]
    x = exact_noise.sample(kind, N, scale)
    assert x.dtype == np.int64 and x.size == N
    assert chi2_pvalue(x, lambda z: pmf(z, scale)) > ALPHA
    for wrong in (1.1 * scale, scale / 1.1, 2 * scale):
        assert chi2_pvalue(x, lambda z, w=wrong: pmf(z, w)) < 1e-6


@pytest.mark.parametrize("kind", ["Gaussian", "gauss", "", "uniform"])
def test_sample_refuses_unknown_kind(kind: str) -> None:
    with pytest.raises(ConfigError, match="unknown noise kind"):
        exact_noise.sample(kind, 10, 1.0)


def two_sample_pvalue(a: np.ndarray, b: np.ndarray, min_count: int = 20) -> float:
    """Chi-square homogeneity test on integer samples, sparse cells pooled into two tails."""
    lo, hi = min(a.min(), b.min()), max(a.max(), b.max())
    ca = np.bincount(a - lo, minlength=hi - lo + 1)
    cb = np.bincount(b - lo, minlength=hi - lo + 1)
    dense = np.flatnonzero((ca + cb) >= min_count)
    first, last = dense[0], dense[-1]
    rows = [
        np.concatenate([[c[:first].sum()], c[first : last + 1], [c[last + 1 :].sum()]])
        for c in (ca, cb)
    ]
    table = np.array(rows)
    table = table[:, table.sum(axis=0) > 0]
    return float(stats.chi2_contingency(table).pvalue)


@pytest.mark.parametrize(("kind", "scale"), [("laplace", 6.5), ("gaussian", 3.7)])
def test_same_law_as_opendp(kind: str, scale: float) -> None:
    n = 30_000  # OpenDP runs at ~1e5 values/s here
    zeros = np.zeros(n, dtype=np.int64)
    fn = {
        "laplace": samplers.secure_discrete_laplace,
        "gaussian": samplers.secure_discrete_gaussian,
    }[kind]
    ours = fn(zeros, scale)
    theirs = fn(zeros, scale, backend="opendp")
    assert two_sample_pvalue(ours, theirs) > ALPHA
    # power: OpenDP at a 2x scale must be told apart
    wider = fn(zeros, 2 * scale, backend="opendp")
    assert two_sample_pvalue(ours, wider) < 1e-6


@pytest.mark.usefixtures("seeded")
def test_exact_slow_paths_follow_the_law() -> None:
    """The pure-Python exact paths alone (a uniform on all of (0, 1)) match the pmf."""
    n = 3000
    lam = Fraction(1, 2)  # geometric: P(G >= k) = exp(-k/2)
    g = np.array([exact_noise.exact_geometric(lam, Fraction(0), Fraction(1)) for _ in range(n)])
    q = math.exp(-0.5)
    assert chi2_pvalue(g, lambda z: np.where(z >= 0, (1 - q) * q ** np.abs(z), 0.0), 5) > ALPHA
    gamma = Fraction(7, 10)
    hits = sum(exact_noise.exact_bernoulli_exp(gamma, Fraction(0), Fraction(1)) for _ in range(n))
    assert stats.binomtest(hits, n, math.exp(-0.7)).pvalue > ALPHA


class Words:
    """Deterministic stand-in for os.urandom words (to compare fast and exact paths)."""

    def __init__(self, seed: int) -> None:
        self.gen = np.random.default_rng(seed)

    def __call__(self) -> int:
        return int(self.gen.integers(0, 2**64, dtype=np.uint64))


def edge_words(thresholds: list[float]) -> np.ndarray:
    """Random words plus words at/near the decision thresholds and the ends of the range."""
    gen = np.random.default_rng(5)
    words = [int(w) for w in gen.integers(0, 2**64, size=3000, dtype=np.uint64)]
    words += [0, 1, 2, 2**63, 2**64 - 2, 2**64 - 1]
    for t in thresholds:
        centre = int(Fraction(t) * 2**64)
        words += [min(2**64 - 1, max(0, centre + d)) for d in range(-3, 4)]
    return np.array(words, dtype=np.uint64)


@pytest.mark.parametrize("b", [0.5, 3.0, 1e3])
def test_fast_geometric_agrees_with_exact_path(b: float, monkeypatch) -> None:
    """For every word, the vectorised decision equals the exact decision on the same uniform."""
    words = edge_words([math.exp(-k / b) for k in range(1, 40)])
    monkeypatch.setattr(exact_noise, "random_words", lambda n: words[:n])
    monkeypatch.setattr(exact_noise, "_word", Words(1))
    fast = exact_noise.geometric(words.size, b)
    monkeypatch.setattr(exact_noise, "_word", Words(1))
    lam = 1 / Fraction(b)
    width = Fraction(1, 2**64)
    exact = [exact_noise.exact_geometric(lam, Fraction(int(w), 2**64), width) for w in words]
    assert fast.tolist() == exact


def test_fast_gaussian_acceptance_agrees_with_exact_path(monkeypatch) -> None:
    sigma, t = 2.5, 3
    gen = np.random.default_rng(3)
    y = gen.integers(-40, 41, size=400)
    probs = [math.exp(-((abs(v) - sigma**2 / t) ** 2) / (2 * sigma**2)) for v in y.tolist()]
    words = edge_words(probs)[-y.size :]
    monkeypatch.setattr(exact_noise, "random_words", lambda n: words[:n])
    monkeypatch.setattr(exact_noise, "_word", Words(2))
    fast = exact_noise._gaussian_accept(y, sigma, t)
    monkeypatch.setattr(exact_noise, "_word", Words(2))
    s2 = Fraction(sigma) ** 2
    exact = [
        exact_noise.exact_bernoulli_exp(
            (abs(int(v)) - s2 / t) ** 2 / (2 * s2), Fraction(int(w), 2**64), Fraction(1, 2**64)
        )
        for v, w in zip(y.tolist(), words.tolist(), strict=True)
    ]
    assert fast.tolist() == exact


def test_samplers_wiring_and_shapes() -> None:
    values = np.arange(12, dtype=np.int64).reshape(3, 4)
    for fn in (samplers.secure_discrete_laplace, samplers.secure_discrete_gaussian):
        for backend in ("numpy", "opendp"):
            out = fn(values, 2.0, backend=backend)
            assert out.shape == values.shape and out.dtype == np.int64
        with pytest.raises(ValueError, match="backend"):
            fn(values, 2.0, backend="nope")  # type: ignore[arg-type]
        assert fn(np.zeros(0, dtype=np.int64), 2.0).size == 0
    # large vectors are split into threaded chunks and every slot is filled
    big = samplers.secure_discrete_laplace(np.zeros(3 * exact_noise.CHUNK + 7, np.int64), 1e6)
    assert np.count_nonzero(big) > big.size * 0.99


def test_platform_assumption_holds() -> None:
    assert exact_noise.check_platform()


def test_platform_check_catches_an_inaccurate_exp() -> None:
    """The check passes numpy's exp and fails one off by 2^-46 relative (4x the tolerance),
    with each reference: decimal always, extended precision where the platform has it (where it
    does, it agrees with decimal to 2^-60)."""
    from decimal import Decimal, localcontext

    xs = np.concatenate([np.linspace(0.0, 64.0, 301), np.linspace(64.0, 700.0, 61)])
    good = np.exp(-xs)
    bad = good * (1 + 2.0**-46)
    refs = [False] + ([True] if exact_noise.has_extended_precision() else [])
    for extended in refs:
        assert exact_noise.exp_meets_tolerance(xs, good, extended)
        assert not exact_noise.exp_meets_tolerance(xs, bad, extended)
    if exact_noise.has_extended_precision():
        ext = exact_noise.reference_exp_neg(xs, True)
        with localcontext() as ctx:
            ctx.prec = 40
            exact = [(-Decimal(x)).exp() for x in xs.tolist()]
            worst = max(
                abs(Decimal(np.format_float_scientific(r, unique=True)) - e) / e
                for r, e in zip(ext, exact, strict=True)
            )
        assert worst < Decimal(2) ** -60


def test_random_words_come_from_the_os(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every random bit of the samplers comes from os.urandom (the fit tests above replace
    these two functions with a seeded generator; this is what they stand for)."""
    asked: list[int] = []

    def urandom(k: int) -> bytes:
        asked.append(k)
        return bytes(range(k % 256)) if k < 256 else bytes(k)

    monkeypatch.setattr(exact_noise.os, "urandom", urandom)
    words = exact_noise.random_words(4)
    assert asked == [32] and words.tolist() == np.frombuffer(bytes(range(32)), np.uint64).tolist()
    assert exact_noise._word() == int.from_bytes(bytes(range(8)), "little") and asked[-1] == 8
    monkeypatch.undo()
    a, b = exact_noise.sample("laplace", 1000, 5.0), exact_noise.sample("laplace", 1000, 5.0)
    assert not np.array_equal(a, b)  # fresh secure bits on each call
