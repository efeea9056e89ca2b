"""The options of a bound chosen for accuracy (``-T auto``, ``--rescale``) shared by ``od`` and
``counts`` (:mod:`privmob.releases.bound_choice`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Annotated, Any, TypeVar

import typer

from privmob.cli import common as c

F = TypeVar("F", bound=Callable[..., Any])

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

#: name -> (annotation, default), in the order they are listed in ``--help``: a command takes
#: them with :func:`with_bound_choice_options` and reads them with :func:`choice_of_params`
BOUND_CHOICE_OPTIONS: dict[str, tuple[Any, Any]] = {
    "bound_quantile": (BoundQuantileOpt, None),
    "bound_share": (BoundShareOpt, None),
    "bound_max": (BoundMaxOpt, None),
    "rescale": (RescaleOpt, False),
    "rescale_share": (RescaleShareOpt, None),
}


#: the options of a command that chooses its bound but does not rescale (the report)
RESCALE_OPTIONS = ("rescale", "rescale_share")


def with_bound_choice_options(*, without: tuple[str, ...] = ()) -> Callable[[F], F]:
    """Add the options of a bound chosen for accuracy to a command, after its own parameters
    (the command's function is called without them: they stay in ``ctx.params``); ``without``
    leaves some out (:data:`RESCALE_OPTIONS`)."""
    return c.with_options(BOUND_CHOICE_OPTIONS, without=without)


def choice_of_params(params: Mapping[str, Any]) -> Any:
    """The :class:`~privmob.privacy.bound_choice.BoundChoice` a command's parsed parameters
    (``ctx.params``) state with these options (or None; an option the command does not take
    is its default)."""
    return choice_options(
        *(params.get(name, default) for name, (_, default) in BOUND_CHOICE_OPTIONS.items())
    )


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
