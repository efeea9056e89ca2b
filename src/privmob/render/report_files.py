"""Files of a mobility report: the JSON document (every analysis), Parquet tables and HTML.

The JSON document is the release's metadata (which holds every released number); the HTML is
rendered from that same document, so both always show the same numbers.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from privmob.errors import InputError
from privmob.releases.files import json_default
from privmob.releases.release import Release
from privmob.releases.stamp import write_stamped_parquet

if TYPE_CHECKING:
    from privmob.releases.publish import Output


def report_document(release: Release) -> dict[str, Any]:
    """The JSON-ready document of a charged mobility report release."""
    doc = release.metadata()
    plain: dict[str, Any] = json.loads(json.dumps(doc, default=json_default))
    return plain


def report_paths(html_path: str | Path) -> dict[str, Path]:
    """Where :func:`write_report` writes: the HTML, the JSON beside it, the tables folder."""
    html = Path(html_path)
    if html.suffix.lower() not in (".html", ".htm"):
        html = html.with_suffix(".html")
    return {
        "html": html,
        "json": html.with_suffix(".json"),
        "tables": html.with_name(html.stem + "_tables"),
    }


def write_report(
    release: Release, html_path: str | Path, *, overwrite: bool = False, basemap: bool = True
) -> dict[str, Path]:
    """Write ``report.html``, ``report.json`` beside it and ``report_tables/*.parquet``.

    Refuses an uncharged release and existing files unless ``overwrite``. ``basemap=False``:
    the maps draw no web tiles and the page names no external address
    (:func:`~privmob.render.report_html.render_report_html`).
    """
    from privmob.releases.publish import publish_charged

    if release.ledger_entry is None:
        raise InputError("a release must be charged to the ledger before it is written")
    publish_charged(release, report_output(html_path, overwrite=overwrite, basemap=basemap))
    return report_paths(html_path)


def report_output(
    html_path: str | Path, *, overwrite: bool = False, basemap: bool = True
) -> Output:
    """Where a report is published (``releases/publish.py``): its three paths, staged together
    beside the HTML and renamed into place after the charge (``basemap``: as in
    :func:`write_report`)."""
    from privmob.releases.publish import Output

    paths = report_paths(html_path)
    html, js, tables = paths["html"], paths["json"], paths["tables"]

    def write_tables(release: Release, staging: Path) -> list[Path]:
        (staging / tables.name).mkdir()
        out = []
        for name, df in release.tables.items():
            out.append(staging / tables.name / f"{name}.parquet")
            write_stamped_parquet(df, out[-1], release)
        return out

    def write_document(release: Release, staging: Path) -> list[Path]:
        from privmob.render.report_html import render_report_html

        doc = report_document(release)  # names the ledger entries: written at the charge
        # streamed: json.dumps with an indent joins a list of every chunk first (some 8
        # million strings for the 4 million OD cells of 2,000 tiles, about 0.4 GB); json.dump
        # writes the same text chunk by chunk
        with open(staging / js.name, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
        (staging / html.name).write_text(render_report_html(doc, basemap=basemap), encoding="utf-8")
        return [staging / js.name, staging / html.name]

    return Output(
        html,
        overwrite=overwrite,
        data=write_tables,
        meta=write_document,
        items=(html.name, js.name, tables.name),
    )


def read_report(path: str | Path) -> dict[str, Any]:
    """Read a report JSON document written by :func:`write_report`."""
    p = Path(path)
    try:
        doc: dict[str, Any] = json.loads(p.read_text())
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read the report {p}: {exc}", source=str(p)) from exc
    if doc.get("kind") not in ("report", "mobility_report"):  # and older reports
        raise InputError(f"{p} is not a privmob mobility report JSON", source=str(p))
    return doc
