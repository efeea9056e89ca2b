"""One name per idea in the public vocabulary (issue 28, item 5): the study period is one type,
``pm.Period`` (``privmob.domain.Period``; ``StudyPeriod`` its earlier name), and the privacy
unit one enum, ``pm.PrivacyUnit`` (``privmob.privacy.costs.Unit`` its earlier name)."""

from __future__ import annotations

import pickle

import pytest

import privmob as pm
from privmob import domain, dp
from privmob.errors import ConfigError


def test_the_period_is_one_type() -> None:
    assert pm.Period is dp.Period is domain.Period is domain.StudyPeriod
    public = pm.Period("2024-01-01", "2024-02-01", bin="day")
    inner = domain.Period.parse("day", "2024-01-01", "2024-02-01")  # the loaders' spelling
    # two types before: a pm.Period was never equal to the StudyPeriod of the same dates
    assert public == inner and hash(public) == hash(inner)
    assert pickle.loads(pickle.dumps(public)) == public  # shipped to Spark executors
    assert public.n_bins == 31 and public.labels()[1] == "2024-01-02"
    assert pm.Period() == domain.Period.parse("all", None, None)


def test_the_earlier_positional_order_is_refused_with_the_new_one() -> None:
    """``StudyPeriod("day", start, end)`` put the bin first: read now as a start date, it
    would be wrong or fail deep in the release, so it is refused with the two right forms."""
    with pytest.raises(ConfigError, match="as the start date") as err:
        domain.StudyPeriod("day")
    assert 'bin="day"' in str(err.value.hint) and "Period.parse" in str(err.value.hint)
    with pytest.raises(TypeError):  # start and end are the only positional parameters
        domain.StudyPeriod("day", "2024-01-01", "2024-02-01")  # type: ignore[misc]


def test_the_privacy_unit_has_one_name() -> None:
    from privmob.privacy import costs

    assert pm.PrivacyUnit is dp.PrivacyUnit is costs.PrivacyUnit is costs.Unit
    assert pm.PrivacyUnit.__name__ == "PrivacyUnit"  # what a user sees: repr, help, errors
    assert repr(pm.PrivacyUnit("landmark")) == "<PrivacyUnit.LANDMARK: 'landmark'>"
    assert str(pm.PrivacyUnit.USER) == "user"  # the ledger's and metadata's value, unchanged
