"""Empirical epsilon lower bound from an attack's error rates (SPEC section 7).

For an (epsilon, delta)-DP mechanism every membership test satisfies
FPR + e^epsilon FNR >= 1 - delta and FNR + e^epsilon FPR >= 1 - delta, hence

    epsilon >= max( ln((1 - delta - FPR)/FNR), ln((1 - delta - FNR)/FPR) ).

The observed rates are replaced by Clopper-Pearson *upper* confidence bounds, so the result is a
lower bound on the mechanism's true epsilon that holds with the stated confidence: each of the
two upper bounds is one-sided at level 1 - (1 - confidence)/2, and by the union bound both hold
together with probability >= ``confidence``. A lower bound above the claimed epsilon is
evidence (at that confidence) that the mechanism does not deliver its claim.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy.stats import beta

from privmob.errors import ConfigError


def clopper_pearson_upper(errors: int, n: int, alpha: float) -> float:
    """One-sided upper confidence bound (level 1 - alpha) on a binomial rate."""
    if n <= 0 or not 0 <= errors <= n:
        raise ConfigError(f"need 0 <= errors <= n and n > 0, got errors={errors}, n={n}")
    if errors == n:
        return 1.0
    return float(beta.ppf(1.0 - alpha, errors + 1, n - errors))


def clopper_pearson_lower(errors: int, n: int, alpha: float) -> float:
    """One-sided lower confidence bound (level 1 - alpha) on a binomial rate."""
    if n <= 0 or not 0 <= errors <= n:
        raise ConfigError(f"need 0 <= errors <= n and n > 0, got errors={errors}, n={n}")
    if errors == 0:
        return 0.0
    return float(beta.ppf(alpha, errors, n - errors + 1))


def _eps_from_rates(fpr: float, fnr: float, delta: float) -> float:
    best = 0.0
    for a, b in ((fpr, fnr), (fnr, fpr)):
        num = 1.0 - delta - a
        if num <= 0:
            continue
        if b <= 0:
            return math.inf
        best = max(best, math.log(num / b))
    return best


@dataclass(frozen=True)
class EpsilonAudit:
    """An empirical epsilon lower bound beside the claim."""

    epsilon_lower: float  # holds with probability >= confidence
    epsilon_point: float  # from the observed rates (no confidence)
    claimed: float | None
    fpr: float
    fnr: float
    fpr_upper: float
    fnr_upper: float
    confidence: float
    n_negative: int
    n_positive: int

    @property
    def violated(self) -> bool:
        """True when the lower bound exceeds the claimed epsilon."""
        return self.claimed is not None and self.epsilon_lower > self.claimed * (1 + 1e-12)

    def describe(self) -> str:
        text = (
            f"empirical epsilon >= {self.epsilon_lower:.4f} ({self.confidence:.0%} confidence; "
            f"point estimate {self.epsilon_point:.4f}) from FPR={self.fpr:.4f} "
            f"(n={self.n_negative}), FNR={self.fnr:.4f} (n={self.n_positive})"
        )
        if self.claimed is not None:
            verdict = "VIOLATED" if self.violated else "consistent"
            text += f"; claimed epsilon {self.claimed:g}: {verdict}"
        return text


def empirical_epsilon(
    false_positives: int,
    n_negative: int,
    false_negatives: int,
    n_positive: int,
    *,
    delta: float = 0.0,
    confidence: float = 0.95,
    claimed: float | None = None,
) -> EpsilonAudit:
    """Lower bound on epsilon from an attack's FP/FN counts (Clopper-Pearson, SPEC 7)."""
    if not 0 < confidence < 1:
        raise ConfigError("confidence must be in (0, 1)")
    if not 0 <= delta < 1:
        raise ConfigError("delta must be in [0, 1)")
    alpha = (1.0 - confidence) / 2.0
    fpr_u = clopper_pearson_upper(int(false_positives), int(n_negative), alpha)
    fnr_u = clopper_pearson_upper(int(false_negatives), int(n_positive), alpha)
    fpr = false_positives / n_negative
    fnr = false_negatives / n_positive
    return EpsilonAudit(
        epsilon_lower=_eps_from_rates(fpr_u, fnr_u, delta),
        epsilon_point=_eps_from_rates(fpr, fnr, delta),
        claimed=claimed,
        fpr=fpr,
        fnr=fnr,
        fpr_upper=fpr_u,
        fnr_upper=fnr_u,
        confidence=confidence,
        n_negative=int(n_negative),
        n_positive=int(n_positive),
    )
