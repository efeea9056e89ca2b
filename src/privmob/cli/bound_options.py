"""The options of a bound chosen for accuracy (``-T auto``, ``--rescale``) shared by ``od`` and
``counts`` (:mod:`privmob.releases.bound_choice`)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

BoundQuantileOpt = Annotated[
    float | None,
    typer.Option(
        "--bound-quantile",
        help="with -T auto: the quantile of records per user chosen as the bound (default 0.9)",
    ),
]
BoundShareOpt = Annotated[
    float | None,
    typer.Option(
        "--bound-share",
        help="with -T auto: the share of epsilon spent choosing the bound (default 0.1)",
    ),
]
BoundMaxOpt = Annotated[
    int | None,
    typer.Option(
        "--bound-max",
        help="with -T auto or --rescale: the largest candidate bound and the rescale's cap "
        "(public; default 100)",
    ),
]
RescaleOpt = Annotated[
    bool,
    typer.Option(
        "--rescale",
        help="multiply the counts by a noisy (records up to --bound-max per user) / (records "
        "kept), correcting what the bound cut (biased if heavy users travel differently; "
        "stated in the metadata)",
    ),
]
RescaleShareOpt = Annotated[
    float | None,
    typer.Option(
        "--rescale-share", help="with --rescale: the share of epsilon of its totals (0.05)"
    ),
]


def choice_options(
    bound_quantile: float | None,
    bound_share: float | None,
    bound_max: int | None,
    rescale: bool,
    rescale_share: float | None,
) -> Any:
    """The :class:`~privmob.privacy.bound_choice.BoundChoice` these options state (or None)."""
    from privmob.privacy.bound_choice import choice_of

    return choice_of(
        {
            "bound_quantile": bound_quantile,
            "bound_share": bound_share,
            "bound_max": bound_max,
            "rescale": rescale or None,
            "rescale_share": rescale_share,
        }
    )
