"""noisy_max refuses parameters without a guarantee (a negative scale would pick the worst
candidate with the seeded sampler; zero divides)."""

import numpy as np
import pytest

from privmob.errors import ConfigError
from privmob.privacy.mechanisms import noisy_max


@pytest.mark.parametrize(("epsilon", "sensitivity"), [(0.0, 1.0), (-1.0, 1.0), (1.0, -1.0)])
def test_noisy_max_rejects_non_positive_parameters(epsilon, sensitivity):
    with pytest.raises(ConfigError):
        noisy_max(np.array([0.0, 100.0]), epsilon, sensitivity, rng=1)
