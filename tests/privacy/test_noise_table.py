"""What differs by noise kind is one table (issue 41): :data:`NOISE_KINDS`, a row per kind,
asked by the code that uses noise instead of comparing kinds."""

from __future__ import annotations

import re
from pathlib import Path

import privmob
from privmob.privacy.mechanisms import NOISE_KINDS, NoiseKind

SRC = Path(privmob.__file__).parent
#: ``kind is NoiseKind.DISCRETE_GAUSSIAN``, ``NoiseKind(noise) is not ...``, ``== NoiseKind.``
KIND_CHECK = re.compile(r"\b(is|is\s+not|==|!=)\s+NoiseKind\.")


def test_every_noise_kind_has_its_row() -> None:
    assert set(NOISE_KINDS) == set(NoiseKind)
    assert all(kind.traits is NOISE_KINDS[kind] for kind in NoiseKind)


def test_privacy_and_releases_ask_the_kind_s_row_not_which_kind_it_is() -> None:
    found = [
        f"{path.relative_to(SRC)}:{number}: {line.strip()}"
        for folder in ("privacy", "releases")
        for path in sorted((SRC / folder).rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if KIND_CHECK.search(line)
    ]
    assert found == []
