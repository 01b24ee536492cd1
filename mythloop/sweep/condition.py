"""One condition x replicate of a sweep: its sandbox, measurement and learning turns.

Plain library code; `tasks/sweep.py` wraps the steps as Prefect tasks.
The sandbox holds everything the condition writes: its verdict store, its
workspace copies of the skills, the per-round JSONL and the raw turn texts.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mythloop.fileio import (
    append_jsonl,
    jsonl_text,
    read_records,
    replacing,
    write_json_atomic,
    write_text_atomic,
)
from mythloop.llm import BackendTimeout, get_backend, is_retriable
from mythloop.router import Router
from mythloop.router.explore import EXPLORE_WINDOW, exploration_rng, learning_catalog
from mythloop.router.ranker import full_text, name_text
from mythloop.settings import get_settings
from mythloop.skills import Catalog
from mythloop.sweep.config import SweepConfig, SweepPrompt, replicate_seed, resolve_cold_skills
from mythloop.sweep.records import (
    AppliedVerdict,
    CatalogEntry,
    MeasurementRow,
    MeasureResult,
    TurnAnswer,
    TurnRow,
)
from mythloop.verdicts import VerdictStore, count_malformed_tags, parse_tags, persist_verdicts
from mythloop.vocab import (
    AGREEMENT_CONDITIONS,
    BLEND_CONDITIONS,
    EXPLORING_CONDITIONS,
    TUNING_CONDITIONS,
    Condition,
)

if TYPE_CHECKING:
    from mythloop.llm import Backend
    from mythloop.router import Router
    from mythloop.verdicts import VerdictStore

__all__ = ["ConditionRun", "render_catalog", "learning_prompt", "session_id_for"]

_RANK_BLOCK = 256
"""Prompts ranked together: their products with a 4,000-skill matrix take 8 MB."""


def render_catalog(ranked: list[CatalogEntry]) -> str:
    """The seed's "Skills (mandatory)" catalog block for the top-k shown to the model."""
    lines = [
        "## Skills (mandatory)",
        "Before replying, scan the skills below. If a skill matches or is even partially relevant "
        "to your task, you MUST load it with skill_view(name) and follow its instructions. "
        "Err on the side of loading.",
        "",
        "<available_skills>",
    ]
    for entry in ranked:
        desc = " ".join((entry.description or "").split())[:300]
        lines.append(f"  - {entry.name}: {desc}" if desc else f"  - {entry.name}")
    lines.append("</available_skills>")
    return "\n".join(lines)


def learning_prompt(ranked: list[CatalogEntry], contract: str, task: str) -> str:
    return render_catalog(ranked) + "\n\n---\n" + contract.strip() + "\n\nUser task:\n" + task


def session_id_for(cond: str, replicate: int, round_idx: int, prompt_id: str) -> str:
    """Stable across retries and resumes, so a repeated write of a turn is a no-op."""
    return f"{cond}-rep{replicate}-r{round_idx}-{prompt_id}"


@dataclass
class ConditionRun:
    """Live state of one condition x replicate inside a sweep process."""

    config: SweepConfig
    cond: Condition
    replicate: int
    results_dir: Path
    catalog: Catalog
    prompts: list[SweepPrompt]
    base_seed: int
    embedder: Any
    dir: Path = field(init=False)
    seed: int = field(init=False)

    def __post_init__(self) -> None:
        self.dir = self.results_dir / f"{self.cond}-rep{self.replicate}"
        self.seed = replicate_seed(self.base_seed, self.replicate)
        # Cold skills (--cold-skills): the same for every condition and replicate.
        self.cold = frozenset(resolve_cold_skills(self.config, self.catalog.names(),
                                                  self.base_seed))
        self.store: VerdictStore | None = None  # these three: set by open()
        self.router: Router | None = None
        self.backend: Backend | None = None

    # --- layout ------------------------------------------------------------------
    @property
    def name(self) -> str:
        return f"{self.cond}-rep{self.replicate}"

    @property
    def store_path(self) -> Path:
        return self.dir / "store.db"

    @property
    def workspace(self) -> Path:
        return self.dir / "workspace"

    @property
    def progress_path(self) -> Path:
        return self.dir / "progress.json"

    @property
    def turns_path(self) -> Path:
        return self.dir / "turns.jsonl"

    def round_path(self, round_idx: int) -> Path:
        return self.dir / f"round_{round_idx}.jsonl"

    def explore_path(self, round_idx: int) -> Path:
        """The round's exploratory catalog slots (one row per learning catalog that has one)."""
        return self.dir / f"round_{round_idx}.explore.jsonl"

    # --- cold skills -------------------------------------------------------------
    def absent(self, round_idx: int) -> frozenset[str]:
        """Skills not yet in the pool at this round (--add-skills-at)."""
        add_at = self.config.add_skills_at
        return self.cold if add_at is not None and round_idx < add_at else frozenset()

    def learns(self, prompt: SweepPrompt, round_idx: int) -> bool:
        """Whether this round learns from the prompt: a learned kind, and not a prompt of a
        cold skill (until the round the cold skills join the pool, with --add-skills-at)."""
        if not prompt.learned:
            return False
        if prompt.expected_skill not in self.cold:
            return True
        add_at = self.config.add_skills_at
        return add_at is not None and round_idx >= add_at

    @property
    def tunes(self) -> bool:
        """Whether this condition fine-tunes its own copy of the embedding model (C5)."""
        return self.cond in TUNING_CONDITIONS

    @property
    def models_path(self) -> Path:
        """C5: which model each round ranked with (mythloop/sweep/tuned.py)."""
        return self.dir / "models.json"

    def use_embedder(self, embedder) -> None:
        """Rank (and embed new verdicts) with another model from now on: the store's stored
        vectors of any other model are re-embedded from their texts on the next ranking."""
        self.embedder = embedder
        if self.store is not None:
            # the plausibility gate stays the base model's: a tuned model learned from
            # verdicts, so it never decides which verdicts count (docs/blend.md, "Defences")
            gate = self.router.plausibility if self.router is not None else None
            self.embed_all(embedder)
            self.router = Router(self.catalog, self.store, embedder,
                                 blend=self.cond in BLEND_CONDITIONS,
                                 agreement=self.cond in AGREEMENT_CONDITIONS, plausibility=gate)

    def embed_all(self, embedder) -> int:
        """Every text a round ranks with, under `embedder`'s model, in one batched model call:
        the skills' texts and names, the prompts, and the store's contexts and reasons of
        known skills whose vectors are another model's. Each distinct text once; one the
        embedder holds already (its memo, its disk cache) is not encoded again. The router,
        the verdict arrays and the measurement then find every vector there. Returns how many
        distinct texts were asked for."""
        assert self.store is not None, "open() first"
        known = set(self.catalog.names())
        snap = self.store.snapshot()
        texts = [full_text(s) for s in self.catalog.skills]
        texts += [name_text(s.name) for s in self.catalog.skills]
        texts += [p.prompt for p in self.prompts]
        texts += [r.text for r in (*snap.contexts, *snap.reasons)
                  if r.skill_name in known and r.text
                  and (r.model_id != embedder.model_id or r.vec is None)]
        distinct = [t for t in dict.fromkeys(texts) if t]
        if distinct:
            embedder.embed(distinct)
        return len(distinct)

    @property
    def explores(self) -> bool:
        """Whether the learning catalog keeps an exploration slot (C4; docs/blend.md)."""
        return self.cond in EXPLORING_CONDITIONS and get_settings().c4_explore_sigma > 0

    def snapshot_path(self, round_idx: int) -> Path:
        return self.dir / "snapshots" / f"store_before_round_{round_idx}.db"

    @property
    def learning_order(self) -> list[SweepPrompt]:
        """Learned prompts in this replicate's own shuffled order (file order for rep 1)."""
        learned = [p for p in self.prompts if p.learned]
        if self.replicate > 1:
            random.Random(self.seed).shuffle(learned)
        return learned

    # --- progress ----------------------------------------------------------------
    def completed_rounds(self) -> list[int]:
        try:
            return sorted(json.loads(self.progress_path.read_text())["completed_rounds"])
        except (OSError, ValueError, KeyError):
            return []

    def mark_round_complete(self, round_idx: int) -> None:
        done = sorted(set(self.completed_rounds()) | {round_idx})
        write_json_atomic(self.progress_path, {"completed_rounds": done,
                                               "fingerprint": self.config.fingerprint()})

    # --- sandbox -----------------------------------------------------------------
    def open(self) -> None:
        """Create (or reopen, on resume) the sandbox, store, router and backend."""
        self.dir.mkdir(parents=True, exist_ok=True)
        self.turn_timeout = self.config.turn_timeout or _settings_turn_timeout()
        self._materialise_skills()
        self.store = VerdictStore(self.store_path, self.dir / "verdicts.npz")
        self.router = Router(self.catalog, self.store, self.embedder,
                             blend=self.cond in BLEND_CONDITIONS,
                             agreement=self.cond in AGREEMENT_CONDITIONS)
        self.backend = self._make_backend()

    def close(self) -> None:
        if self.store is not None:
            self.store.close()

    def _materialise_skills(self) -> None:
        """Copies (not links: CLI workspaces reject links that leave them) of every skill."""
        skills_dir = self.workspace / ".gemini" / "skills"
        if skills_dir.is_dir() and len(list(skills_dir.iterdir())) == len(self.catalog.skills):
            return
        skills_dir.mkdir(parents=True, exist_ok=True)
        for skill in self.catalog.skills:
            target = skills_dir / skill.name
            if not target.exists():
                shutil.copytree(skill.path.parent, target, symlinks=False)
        home = self.dir / "home"
        for sub in (".gemini/skills", ".agents/skills"):
            (home / sub).mkdir(parents=True, exist_ok=True)

    def _make_backend(self):
        options = self.config.judge_options
        if self.config.simulated:
            tiers = {s.name: s.tier for s in self.catalog.skills if s.tier}
            expected = {p.prompt: p.expected_skill for p in self.prompts}
            extra = {} if self.config.judge == "oracle" else {
                "noise": options.noise, "omit_rate": options.omit_rate,
                "invent_rate": options.invent_rate}
            if options.persuade > 0:  # the threat model (docs/blend.md); an oracle is honest
                extra.update(persuade=options.persuade, persuade_others=options.persuade_others)
            return get_backend(self.config.judge, tiers=tiers, expected=expected,
                               seed=self.seed, **extra)
        kwargs = {k: v for k, v in {"model": options.model, "command": options.command}.items()
                  if v}
        if self.config.judge == "gemini":
            kwargs.update(workspace=str(self.workspace),
                          skills=[str(s.path.parent) for s in self.catalog.skills],
                          home=str(self.dir / "home"))
        return get_backend(self.config.judge, **kwargs)

    # --- resume ------------------------------------------------------------------
    def prepare_round(self, round_idx: int) -> None:
        """Make the store and turn log exactly what they were when round `round_idx` began.

        On a first run this snapshots the store; after a crash mid-round it restores
        that snapshot and drops the partial round's turn rows, so a resumed sweep
        ends with the same numbers as an uninterrupted one.
        """
        snapshot = self.snapshot_path(round_idx)
        if snapshot.exists():
            _sqlite_copy(snapshot, self.store_path)
            assert self.router is not None, "open() first"
            self.router.refresh(force=True)
        else:
            with replacing(snapshot) as tmp:
                _sqlite_copy(self.store_path, tmp)
        kept = [row for row in read_records(self.turns_path, TurnRow) if row.round < round_idx]
        # exclude_unset: a kept row is written back with exactly the keys it was read with
        write_text_atomic(self.turns_path, "".join(
            json.dumps(r.model_dump(mode="json", exclude_unset=True), ensure_ascii=False) + "\n"
            for r in kept))

    # --- measure -----------------------------------------------------------------
    def measure(self, round_idx: int) -> MeasureResult:
        """Rank every prompt (top-k), write round_<r>.jsonl, and return the catalogs to learn from."""
        rows: list[MeasurementRow] = []
        catalogs: dict[str, list[CatalogEntry]] = {}
        explored: list[dict] = []
        hits3 = hits5 = gold_found = 0
        wins = pairs = held1 = held = 0
        assert self.router is not None, "open() first"
        k, shown = self.config.learn_top_k, self.config.measure_top_k
        sigma = get_settings().c4_explore_sigma if self.explores else 0.0
        depth = max(shown, EXPLORE_WINDOW * k) if sigma else shown
        absent = self.absent(round_idx)
        for prompt, ranked in zip(self.prompts, self._rank_prompts(depth, absent), strict=True):
            if self.learns(prompt, round_idx):
                catalog, exploration = learning_catalog(
                    ranked, k, sigma, exploration_rng(self.seed, round_idx, prompt.id))
                catalogs[prompt.id] = [
                    CatalogEntry(name=r.name, description=r.description, tier=r.tier)
                    for r in catalog]
                if exploration is not None:
                    explored.append({"round": round_idx, "cond": self.cond,
                                     "replicate": self.replicate, "prompt_id": prompt.id,
                                     "expected_skill": prompt.expected_skill,
                                     **exploration.to_dict()})
            ranked = ranked[:shown]
            for r in ranked:
                rows.append(MeasurementRow(
                    round=round_idx, cond=self.cond, replicate=self.replicate,
                    prompt_id=prompt.id, prompt_kind=prompt.kind,
                    expected_skill=prompt.expected_skill,
                    poisoned_twin=prompt.poisoned_twin,
                    rank=r.rank, skill_name=r.name, tier=r.tier,
                    score=round(float(r.score), 6),
                    breakdown={k: round(float(v), 6) for k, v in r.breakdown.items()},
                    status=r.status, helpful_count=r.helpful,
                    harmful_count=r.harmful, streak=r.streak,
                ))
            names = [r.name for r in ranked]
            if prompt.expected_skill and prompt.kind in ("trap", "normal"):
                gold_found += 1
                hits3 += prompt.expected_skill in names[:3]
                hits5 += prompt.expected_skill in names[:5]
            if prompt.expected_skill and prompt.kind == "trap" and prompt.poisoned_twin:
                # as the analysis counts it: gold above its twin, a missing one ranking last
                top = names[: self.config.measure_top_k]
                gold = top.index(prompt.expected_skill) if prompt.expected_skill in top else None
                twin = top.index(prompt.poisoned_twin) if prompt.poisoned_twin in top else None
                pairs += 1
                wins += gold is not None and (twin is None or gold < twin)
            if prompt.expected_skill and prompt.kind == "heldout":
                held += 1
                held1 += names[:1] == [prompt.expected_skill]
        if sigma:  # written before the round file: a round file means its catalogs are known
            write_text_atomic(self.explore_path(round_idx),
                              "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in explored))
        write_text_atomic(self.round_path(round_idx), jsonl_text(rows))
        return MeasureResult(rows=len(rows), catalogs=catalogs,
                             in_distribution_hit_at_3=hits3 / gold_found if gold_found else None,
                             in_distribution_hit_at_5=hits5 / gold_found if gold_found else None,
                             trap_win_rate=wins / pairs if pairs else None,
                             heldout_hit_at_1=held1 / held if held else None)

    def _rank_prompts(self, depth: int, absent: frozenset[str]):
        """Each prompt's ranking, in prompt order: every prompt embedded in one batched model
        call (a text the embedder holds already is not encoded again), then ranked in blocks
        whose matrix products are one each (Router.rank_many)."""
        assert self.router is not None, "open() first"
        texts = [p.prompt for p in self.prompts]
        if not texts:
            return
        vectors = self.router.embedder.embed(texts)
        for start in range(0, len(texts), _RANK_BLOCK):
            block = slice(start, start + _RANK_BLOCK)
            yield from self.router.rank_many(vectors[block], texts[block], top_k=depth,
                                             exclude=absent)

    # --- learn -------------------------------------------------------------------
    def learning_turn(self, prompt: SweepPrompt, round_idx: int, ranked: list[CatalogEntry],
                      contract: str) -> TurnRow:
        """One learning turn: show the catalog (the entries `measure` chose), call the
        backend, persist verdicts.

        Returns the turn-log row; the caller appends it (so a retried task never
        logs a turn twice, and the store ignores a repeated session write).
        """
        return self.record_turn(prompt, round_idx, ranked,
                                self.ask_turn(prompt, round_idx, ranked, contract))

    def ask_turn(self, prompt: SweepPrompt, round_idx: int, ranked: list[CatalogEntry],
                 contract: str, durable: bool = True) -> TurnAnswer:
        """The model half of a turn: call the backend, keep its raw and text replies.

        Touches no store and no shared state, so the turns of a round may ask side by
        side (threads); `record_turn` then applies each answer, in prompt order.
        `durable=False` (in-process judges, whose replies are reproducible) writes the two
        reply files atomically but without an fsync each: at benchmark size the fsyncs were
        most of a round's learning time.
        """
        session_id = session_id_for(self.cond, self.replicate, round_idx, prompt.id)
        full_prompt = learning_prompt(ranked, contract, prompt.prompt)
        started = time.perf_counter()
        assert self.backend is not None, "open() first"
        completion = self.backend.complete(full_prompt, model=self.config.judge_options.model,
                                           timeout=self.turn_timeout, key=session_id)
        text = completion.text or ""
        raw_dir = self.dir / "raw"
        raw_dir.mkdir(exist_ok=True)
        raw = completion.raw if isinstance(completion.raw, str) else json.dumps(completion.raw)
        write = write_text_atomic if durable else _write_text_replace
        write(raw_dir / f"r{round_idx}_{prompt.id}.raw.txt", raw or "")
        write(raw_dir / f"r{round_idx}_{prompt.id}.text.md", text)
        return TurnAnswer(session_id=session_id, text=text,
                          elapsed_s=round(time.perf_counter() - started, 4),
                          backend=completion.backend, simulated=bool(completion.simulated),
                          model=completion.model)

    def record_turn(self, prompt: SweepPrompt, round_idx: int, ranked: list[CatalogEntry],
                    answer: TurnAnswer) -> TurnRow:
        """The store half of a turn: parse the answer's tags, persist the verdicts in one
        store transaction, and return the turn-log row.

        Callers apply a round's answers in prompt order, whatever order they arrived
        in, so the store (streaks, kept contexts) ends the same at any concurrency.
        """
        session_id = session_id_for(self.cond, self.replicate, round_idx, prompt.id)
        text = answer.text or ""
        tags = parse_tags(text)
        shown = [entry.name for entry in ranked]
        assert self.store is not None, "open() first"
        result = persist_verdicts(
            self.store, shown, tags, session_id=session_id, host=self.config.judge,
            query=prompt.prompt, embedder=self.embedder,
            known_skills={s.name for s in self.catalog.skills})
        tiers = {entry.name: entry.tier for entry in ranked}
        return TurnRow(
            round=round_idx, cond=self.cond, replicate=self.replicate,
            prompt_id=prompt.id, prompt_kind=prompt.kind,
            expected_skill=prompt.expected_skill, session_id=session_id,
            status="ok", error=None,
            elapsed_s=answer.elapsed_s,
            backend=answer.backend, simulated=bool(answer.simulated),
            model=answer.model, ranked_top5=shown, catalog_tiers=tiers,
            tags=tags,
            applied=[AppliedVerdict(name=a["name"], verdict=a["verdict"],
                                    tier=tiers.get(a["name"])) for a in result.applied],
            off_catalog=result.off_catalog, invented=result.invented,
            rejected=result.rejected, parse_failures=count_malformed_tags(text),
            text_len=len(text), text_tail=text[-600:], stderr_head="",
        )

    def learn_round(self, round_idx: int, catalogs: dict[str, list[CatalogEntry]],
                    contract: str, *, retries: int = 0, retry_delay_s: float = 0.0,
                    on_failure=None) -> list[TurnRow]:
        """Every learning turn of a round in this thread: the batched learn step for
        in-process judges. Returns the turn rows in prompt order.

        Three passes: ask every turn, embed every verdict reason and query of the round in
        one model call, then record the answers in prompt order (the store ends as it would
        turn by turn; one encode per turn cost most of a round at benchmark size). A turn
        whose ask raises a retriable error is tried again (up to `retries` times, as its
        own task would be); one that still fails, or whose answer cannot be recorded,
        becomes a failed row and the round goes on. The rows are not appended here: the
        caller does, once the whole step is done.
        """
        def failed(prompt, ranked, exc, attempts):
            timed_out = (isinstance(exc, BackendTimeout | TimeoutError)
                         or "timed out" in str(exc).lower())
            row = self.failed_turn_row(prompt, round_idx, ranked, exc,
                                       timed_out=timed_out, attempts=attempts)
            if on_failure is not None:
                on_failure(row)
            return row

        order = [p for p in self.learning_order if p.id in catalogs]  # not withheld
        outcomes: list[TurnAnswer | TurnRow] = []
        for prompt in order:
            ranked = catalogs[prompt.id]
            attempt = 0
            while True:
                attempt += 1
                try:
                    outcomes.append(self.ask_turn(prompt, round_idx, ranked, contract,
                                                  durable=False))
                    break
                except Exception as exc:  # noqa: BLE001 (a turn's failure is logged, not raised)
                    if is_retriable(exc) and attempt <= retries:
                        time.sleep(retry_delay_s)
                        continue
                    outcomes.append(failed(prompt, ranked, exc, attempt))
                    break
        self._embed_ahead([(p, o) for p, o in zip(order, outcomes, strict=True)
                           if isinstance(o, TurnAnswer)])
        rows = []
        for prompt, outcome in zip(order, outcomes, strict=True):
            if isinstance(outcome, TurnRow):
                rows.append(outcome)
                continue
            try:
                rows.append(self.record_turn(prompt, round_idx, catalogs[prompt.id], outcome))
            except Exception as exc:  # noqa: BLE001
                rows.append(failed(prompt, catalogs[prompt.id], exc, 1))
        return rows

    def _embed_ahead(self, answered: list[tuple[SweepPrompt, TurnAnswer]]) -> None:
        """Embed the reasons and queries `record_turn` will need, in one call (the embedder
        keeps them; recording then finds every vector there)."""
        if self.embedder is None or not answered:
            return
        texts = []
        for prompt, answer in answered:
            texts.append(prompt.prompt)
            texts.extend(" ".join(str(tag.get("reason", "")).split())
                         for tag in parse_tags(answer.text or ""))
        texts = [t for t in dict.fromkeys(texts) if t]
        if texts:
            self.embedder.embed(texts)

    def failed_turn_row(self, prompt: SweepPrompt, round_idx: int, ranked: list[CatalogEntry],
                        error: BaseException | str, timed_out: bool, attempts: int) -> TurnRow:
        """The turn-log row of a turn that still failed after its retries."""
        return TurnRow(
            round=round_idx, cond=self.cond, replicate=self.replicate,
            prompt_id=prompt.id, prompt_kind=prompt.kind,
            expected_skill=prompt.expected_skill,
            session_id=session_id_for(self.cond, self.replicate, round_idx, prompt.id),
            status="timeout" if timed_out else "failed",
            error=" ".join(str(error).split())[:500] or type(error).__name__,
            attempts=attempts, elapsed_s=None, backend=self.config.judge,
            simulated=self.config.simulated, model=self.config.judge_options.model,
            ranked_top5=[entry.name for entry in ranked],
            catalog_tiers={entry.name: entry.tier for entry in ranked},
            tags=[], applied=[], off_catalog=[], invented=[], rejected=[],
            parse_failures=0, text_len=0, text_tail="", stderr_head="",
        )

    def append_turn(self, row: TurnRow) -> None:
        append_jsonl(self.turns_path, row)


def _write_text_replace(path: Path, text: str) -> None:
    """Write via a temp file beside PATH and os.replace, without an fsync (atomic, not
    durable)."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _settings_turn_timeout() -> float:
    return get_settings().turn_timeout


def _sqlite_copy(source: Path, target: Path) -> None:
    """Copy one SQLite database over another with the backup API: consistent under
    WAL and safe while other connections to the target stay open."""
    src = sqlite3.connect(source, timeout=60)
    dst = sqlite3.connect(target, timeout=60)
    try:
        src.backup(dst)
    finally:
        dst.close()
        src.close()
