"""The film's summary for the Prefect UI, as markdown: steps, scenes, verify, the poster,
links to the film and its subtitles, layout findings, scenes kept after a failed repair.

Plain text from the manifest (a FilmManifest); the flow publishes it as an artifact.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mythloop.mythos.media.avmux import thumbnail_data_url
from mythloop.mythos.records import FilmManifest
from mythloop.mythos.sandbox.layout import findings_table
from mythloop.preview import preview_url_for

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
    url = preview_url_for(Path(path))
    return f"[{Path(path).name}]({url})" if url else f"`{path}`"


def watch_lines(data: FilmManifest, video_url: str | None, poster_url: str | None) -> list[str]:
    """The poster (an inline image: Prefect's markdown shows data: images whatever serves
    the run files), links to the film and its subtitles, the layout findings per scene with
    their time, and any scene kept after a failed repair."""
    lines: list[str] = []
    if data.video_path and data.poster and Path(data.poster).is_file():
        try:
            thumb = thumbnail_data_url(Path(data.poster))
        except Exception:  # noqa: BLE001 - a thumbnail is a courtesy
            thumb = None
        if thumb:
            lines += [f"[![poster]({thumb})]({video_url})" if video_url else
                      f"![poster]({thumb})", ""]
    if data.video_path:
        subtitles = data.subtitles
        lines += ["| film | subtitles (SRT) | subtitles (WebVTT) | poster |", "|---|---|---|---|",
                  f"| {link(data.video_path)} | {link(subtitles.srt if subtitles else None)} | "
                  f"{link(subtitles.vtt if subtitles else None)} | {link(data.poster)} |", ""]
    lines += findings_table([(s.label or f"scene-{s.index or 0:02d}", f) for s in data.scenes for f in (s.layout or [])])
    for scene in data.scenes:
        if scene.failed_repair:
            lines.append(f"**Kept after a failed repair:** {scene.label} "
                         f"(repair-{scene.failed_repair.get('attempt')}: "
                         f"{scene.failed_repair.get('error')})")
    return lines


def _shown(value: object) -> object:
    return "" if value is None else value


def film_summary(data: FilmManifest, run_dir: Path) -> FilmSummary:
    """A markdown summary of one film (finished or not) from its manifest."""
    rows = ["| step | seconds | cached | retried | model |", "|---|---|---|---|---|"]
    for stage in data.stages:
        rows.append(f"| {stage.stage} | {_shown(stage.seconds)} | "
                    f"{'yes' if stage.cached else ''} | "
                    f"{'yes' if stage.retried else ''} | {_shown(stage.model)} |")
    check = data.static_check
    verified = ("not run" if check is None else "passed" if check.passed else check.detail)
    lines = [
        f"# Film: {data.prompt}",
        f"Backend **{data.backend}**"
        + (" (offline stand-ins, not a model)" if data.offline else "")
        + (" (replayed recordings, not a live model)" if data.replay else "")
        + f", model `{data.model}`, model calls: {data.model_calls}.",
        "", *rows, "",
        f"**Verify:** {verified}",
        f"**Renders:** {len(data.renders)}; **repairs:** {len(data.repairs)}",
        *([f"**Scenes:** {len(data.scenes)}", "",
           "| scene | class | ok | cache | render s | attempts | repairs |",
           "|---|---|---|---|---|---|---|"]
          + [f"| {s.label} | {s.name} | {s.ok} | {s.cache} | "
             f"{s.render_seconds} | {s.attempts} | {len(s.repairs)} |"
             for s in data.scenes] + [""] if data.scenes else []),
        f"**Video:** `{data.video_path}`" if data.video_path else
        f"**No video.** {(data.failed or {}).get('error', '')}",
        f"**Run dir:** `{run_dir}`",
    ]
    video_url = preview_url_for(Path(data.video_path)) if data.video_path else None
    poster_url = preview_url_for(Path(data.poster)) if data.poster else None
    if data.subtitles:
        lines.insert(-2, f"**Subtitles:** {data.subtitles.cues} cues "
                         f"({'burnt in' if data.subtitles.burnt else 'soft track'}); "
                         f"**voice:** {(data.voice and data.voice.engine) or 'none'}")
    lines[-2:-2] = watch_lines(data, video_url, poster_url)
    return FilmSummary("\n".join(lines), video_url, poster_url)
