"""The film's summary for the Prefect UI, as markdown: steps, scenes, verify, the poster,
links to the film and its subtitles, layout findings, scenes kept after a failed repair.

Plain text from the manifest (a FilmManifest); the flow publishes it as an artifact. Every
value from the manifest is data, not markup: a label, an error or a name a scene or a model
chose is cleaned and escaped (mythloop.textsafe), so that no image, link or HTML of theirs
reaches the Prefect UI; paths show as code spans.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mythloop.mythos.media.avmux import thumbnail_data_url
from mythloop.mythos.records import FilmManifest
from mythloop.mythos.sandbox.layout import Finding, findings_table
from mythloop.preview import preview_url_for
from mythloop.textsafe import md_code, md_text

__all__ = ["FilmSummary", "film_summary", "watch_lines", "link"]


@dataclass(frozen=True)
class FilmSummary:
    """The summary's markdown and the addresses the flow links besides it."""

    markdown: str
    video_url: str | None
    poster_url: str | None


def link(path: str | None) -> str:
    """A markdown link to a run file: its preview address while `serve` runs, else its path."""
    if not path:
        return ""
    url = preview_url_for(Path(path))  # (a %-quoted path on the preview server)
    return f"[{md_text(Path(path).name)}]({url})" if url else md_code(path)


def watch_lines(data: FilmManifest, video_url: str | None, poster_url: str | None) -> list[str]:
    """The poster, a link to watch the film, links to the film and its subtitles, the layout
    findings per scene with their time, and any scene kept after a failed repair.

    The poster is an image on its own, never inside a link: Prefect's default UI shows a
    link's text as it was written, so an image in a link reads as raw markdown there. While
    `mythloop serve` runs it is the preview server's `poster.png` (POSTER_URL); else a small
    JPEG inlined as a `data:` URL, which both UIs show as an image."""
    lines: list[str] = []
    if data.video_path and data.poster and Path(data.poster).is_file():
        image = poster_url
        if image is None:
            try:
                image = thumbnail_data_url(Path(data.poster))
            except Exception:  # noqa: BLE001 - a thumbnail is a courtesy
                image = None
        if image:
            lines += [f"![poster]({image})", ""]
    if video_url:
        lines += [f"**[Watch the film]({video_url})**", ""]
    if data.video_path:
        subtitles = data.subtitles
        lines += ["| film | subtitles (SRT) | subtitles (WebVTT) | poster |", "|---|---|---|---|",
                  f"| {link(data.video_path)} | {link(subtitles.srt if subtitles else None)} | "
                  f"{link(subtitles.vtt if subtitles else None)} | {link(data.poster)} |", ""]
    lines += findings_table([(md_text(s.label or f"scene-{s.index or 0:02d}"), _escaped(f))
                             for s in data.scenes for f in (s.layout or [])])
    for scene in data.scenes:
        if scene.failed_repair:
            lines.append(f"**Kept after a failed repair:** {md_text(scene.label)} "
                         f"(repair-{md_text(scene.failed_repair.get('attempt'))}: "
                         f"{md_text(scene.failed_repair.get('error'))})")
    return lines


def _escaped(finding: Finding) -> Finding:
    """A layout finding whose texts (a scene's labels, from the scene's own record) are
    markdown that shows them as they are."""
    return finding.model_copy(update={"at": md_text(finding.at, 200),
                                      "what": md_text(finding.what, 500),
                                      "detail": md_text(finding.detail, 500)})


def _shown(value: object) -> str:
    return "" if value is None else md_text(value) if isinstance(value, str) else str(value)


def _steps_table(data: FilmManifest) -> tuple[list[str], list[str]]:
    """The steps table and, above it, the models that answered them: one line when every
    step had the same (a model's label can be a sentence, too wide for a table column), else
    a short name per model (M1, M2, ...) in the table and their labels in a list."""
    labels = list(dict.fromkeys(s.model for s in data.stages if s.model))
    short = {label: f"M{n}" for n, label in enumerate(labels, 1)}
    column = len(labels) > 1
    rows = ["| step | seconds | cached | retried |" + (" model |" if column else ""),
            "|---|---|---|---|" + ("---|" if column else "")]
    for stage in data.stages:
        rows.append(f"| {md_text(stage.stage)} | {_shown(stage.seconds)} | "
                    f"{'yes' if stage.cached else ''} | {'yes' if stage.retried else ''} |"
                    + (f" {short.get(stage.model or '', '')} |" if column else ""))
    if not column:
        return rows, ([f"**Model of every step:** {md_text(labels[0])}", ""] if labels else [])
    return rows, ["**Models of the steps:**",
                  *(f"- {short[label]}: {md_text(label)}" for label in labels), ""]


def film_summary(data: FilmManifest, run_dir: Path) -> FilmSummary:
    """A markdown summary of one film (finished or not) from its manifest."""
    rows, models = _steps_table(data)
    check = data.static_check
    verified = ("not run" if check is None else "passed" if check.passed
                else md_text(check.detail))
    lines = [
        f"# Film: {md_text(data.prompt)}",
        f"Backend **{md_text(data.backend)}**"
        + (" (offline stand-ins, not a model)" if data.offline else "")
        + (" (replayed recordings, not a live model)" if data.replay else "")
        + f", model {md_code(data.model)}, model calls: {data.model_calls}.",
        "", *models, *rows, "",
        f"**Verify:** {verified}",
        f"**Renders:** {len(data.renders)}; **repairs:** {len(data.repairs)}",
        *([f"**Scenes:** {len(data.scenes)}", "",
           "| scene | class | ok | cache | render s | attempts | repairs |",
           "|---|---|---|---|---|---|---|"]
          + [f"| {md_text(s.label)} | {md_text(s.name)} | {s.ok} | {md_text(s.cache)} | "
             f"{s.render_seconds} | {s.attempts} | {len(s.repairs)} |"
             for s in data.scenes] + [""] if data.scenes else []),
        f"**Video:** {md_code(data.video_path)}" if data.video_path else
        f"**No video.** {md_text((data.failed or {}).get('error', ''), 4000)}",
        f"**Run dir:** {md_code(run_dir)}",
    ]
    video_url = preview_url_for(Path(data.video_path)) if data.video_path else None
    poster_url = preview_url_for(Path(data.poster)) if data.poster else None
    if data.subtitles:
        lines.insert(-2, f"**Subtitles:** {data.subtitles.cues} cues "
                         f"({'burnt in' if data.subtitles.burnt else 'soft track'}); "
                         f"**voice:** {md_text((data.voice and data.voice.engine) or 'none')}")
    lines[-2:-2] = watch_lines(data, video_url, poster_url)
    return FilmSummary("\n".join(lines), video_url, poster_url)
