"""The settings model (pydantic_settings), loaded on the first `mythloop.settings.get_settings()`.

Read mythloop.settings for what the settings are and where they come from."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import AliasChoices, Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

__all__ = ["Settings"]


def _env(name: str, *aliases: str) -> AliasChoices:
    """Accept ``MYTHLOOP_<NAME>`` first, then the seeds' names."""
    return AliasChoices(f"MYTHLOOP_{name}", *aliases)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(extra="ignore", populate_by_name=True)

    # --- where things live -------------------------------------------------
    state_dir: Path = Field(Path(".mythloop"), validation_alias=_env("STATE_DIR"))
    """Project-local state folder: Prefect home, caches, stores, runs."""

    store_path: Path | None = Field(None, validation_alias=_env("STORE", "MEGA_TRON_STORE"))
    """SQLite verdict store used by `mythloop route` (default: <state_dir>/store.db)."""

    verdict_embeddings: Path | None = Field(
        None, validation_alias=_env("VERDICT_EMBEDDINGS", "MEGA_TRON_VERDICT_EMBEDDINGS")
    )
    """Verdict-reason embeddings file (default: next to the store, verdicts.npz)."""

    runs_dir: Path | None = Field(None, validation_alias=_env("RUNS_DIR", "M2M_RUNS_DIR"))
    """Film runs root; a film lands in <runs_dir>/mythos/<stamp>-<slug>/ (default: <state_dir>/runs)."""

    results_dir: Path | None = Field(None, validation_alias=_env("RESULTS_DIR"))
    """Sweep results root (default: <state_dir>/results)."""

    # --- router --------------------------------------------------------------
    eval_blend: bool = Field(True, validation_alias=_env("EVAL_BLEND", "MEGA_EVAL_BLEND"))
    """Blend verdicts into the ranking (C3). False gives pure semantic similarity (C0)."""

    embedder_model: str = Field("", validation_alias=_env("EMBEDDER_MODEL", "MEGA_EMBEDDER_MODEL"))
    """Sentence-transformers model path or name; empty = the bundled all-MiniLM-L6-v2."""

    w_count: float = Field(0.10, validation_alias=_env("W_COUNT"))
    w_context: float = Field(0.15, validation_alias=_env("W_CONTEXT"))
    w_harm: float = Field(1.5, validation_alias=_env("W_HARM"))
    w_related: float = Field(0.10, validation_alias=_env("W_RELATED"))
    related_k: int = Field(40, validation_alias=_env("RELATED_K"))
    """How many verdict-reason embeddings nearest the query feed the `related` term."""
    # C4 (the agreement rule) also matches a new prompt against a skill's past prompts as one
    # prototype, and adds a lexical signal (docs/blend.md, "C4 on a public benchmark"); C3
    # keeps the reference blend.
    c4_w_context: float = Field(1.0, validation_alias=_env("C4_W_CONTEXT"))
    """C4: weight of the context terms."""
    c4_prototype: bool = Field(True, validation_alias=_env("C4_PROTOTYPE"))
    """C4: help_match is the cosine with the skill's prototype (the mean of its kept helpful
    prompts, up to 20); off: the best single match among them. C3 matches its 3 newest."""
    c4_w_lexical: float = Field(0.2, validation_alias=_env("C4_W_LEXICAL"))
    """C4: weight of the lexical signal (BM25 over name + description, best skill = 1)."""
    c4_prior: float = Field(0.5, ge=0.0, validation_alias=_env("C4_PRIOR"))
    """C4: pseudo-count of the skill's name+description vector in its prototype (the mean of
    n0 copies of it and its kept helpful prompts): a skill with no history is matched
    against its description, on the same scale as one with history (docs/blend.md, "Cold
    skills"). 0: a skill without helpful prompts has no prototype (help_match 0)."""
    c4_lexical_learned: bool = Field(False, validation_alias=_env("C4_LEXICAL_LEARNED"))
    """C4: the lexical documents also hold the prompts each skill was judged helpful for. Off
    by default: learned words favour every skill with history over one without (a cold
    skill fell from hit@5 0.72 to 0.66 on MetaTool; docs/blend.md)."""
    c4_explore_sigma: float = Field(0.1, ge=0.0, validation_alias=_env("C4_EXPLORE_SIGMA"))
    """C4's learning catalog: prior spread of the exploration slot's Thompson draw (score +
    sigma * z / sqrt(1 + verdicts)); 0 turns exploration off (docs/blend.md)."""
    c4_plausible_rank: int = Field(20, ge=0, validation_alias=_env("C4_PLAUSIBLE_RANK"))
    """C4 and C5, a defence against a judge a description can persuade: a HELPFUL verdict's
    prompt counts as evidence for a skill (its prototype, count, C5's training pairs) only
    where the skill ranks within this many for the prompt on its own name and description
    (semantic + lexical terms, the base model); 0: every verdict counts (docs/blend.md,
    "Defences")."""
    c4_max_lift: float = Field(0.0, ge=0.0, validation_alias=_env("C4_MAX_LIFT"))
    """C4 and C5: the most the verdict terms may add to a skill's score above what its
    description earns with no verdicts; 0: no cap (docs/blend.md, "Defences")."""

    # C5 fine-tunes a copy of the embedding model on the verdicts it trusts between rounds
    # (docs/blend.md, "C5"); C4's terms on top.
    c5_epochs: int = Field(1, ge=1, le=20, validation_alias=_env("C5_EPOCHS"))
    """C5: passes over the trusted pairs per fine-tune."""
    c5_batch_size: int = Field(32, ge=2, le=512, validation_alias=_env("C5_BATCH_SIZE"))
    """C5: pairs per step (each batch's other skills are the in-batch negatives)."""
    c5_learning_rate: float = Field(5e-5, gt=0.0, le=1e-2, validation_alias=_env("C5_LEARNING_RATE"))
    """C5: AdamW learning rate."""
    c5_max_seq_length: int = Field(64, ge=8, le=512, validation_alias=_env("C5_MAX_SEQ_LENGTH"))
    """C5: tokens per text while training (prompts and name + description fit in 64)."""
    c5_min_pairs: int = Field(2, ge=1, validation_alias=_env("C5_MIN_PAIRS"))
    """C5: fewer trusted pairs than this and the round keeps the previous model."""
    c5_over_praised: float = Field(1.5, ge=0.0, le=100.0,
                                   validation_alias=_env("C5_OVER_PRAISED"))
    """C5, a defence against a judge a description can persuade: a skill whose trusted
    praise covers more prompts than Tukey's upper fence over the skills with pairs (Q3 + this
    * IQR of their prompt counts; and more than 5) gives no training pairs; 0: off
    (docs/blend.md, "Defences")."""
    c5_gate_pairs: bool = Field(False, validation_alias=_env("C5_GATE_PAIRS"))
    """C5 in a sweep: a HELPFUL verdict becomes a training pair only where the prompt is
    plausible for the skill on its own description (C4's gate, `c4_plausible_rank`). Off: the
    gate keeps out the hard prompts the tuned model learns most from, and the over-praise rule
    holds the attack without it (docs/blend.md, "Defences")."""
    c5_continue: bool = Field(True, validation_alias=_env("C5_CONTINUE"))
    """C5 in a sweep: a round after a tuned one trains the last round's model on the trusted
    pairs it has not learned yet, where every pair it learned is still trusted (otherwise, and
    off, the round trains a copy of the base model on every trusted pair; docs/blend.md,
    "Pay for what changed")."""
    c5_hard_negatives: bool = Field(False, validation_alias=_env("C5_HARD_NEGATIVES"))
    """C5 in a sweep: each trusted pair also gets a hard negative, a skill its prompt's catalog
    showed and the judge did not use (docs/blend.md, "Hard negatives")."""

    abstain_threshold: float = Field(0.45, validation_alias=_env("ABSTAIN_THRESHOLD"))
    """A null prompt abstains when its top score is under this."""

    # --- model backends -----------------------------------------------------
    backend: str | None = Field(None, validation_alias=_env("BACKEND"))
    """The film backend when `film` is given no --backend (offline, replay, claude, gemini,
    codex, openai); unset, `film` says no model is configured and lists the choices. `serve`
    checks it before it starts."""

    command: str | None = Field(None, validation_alias=_env("COMMAND", "M2M_COMMAND"))
    """Executable for the CLI backend (overrides the backend's default binary)."""

    model: str | None = Field(None, validation_alias=_env("MODEL", "M2M_MODEL"))
    """Model name passed to the backend (each backend has its own default)."""

    model_fallbacks: Annotated[list[str], NoDecode] = Field(
        default_factory=list, validation_alias=_env("MODEL_FALLBACKS", "M2M_MODEL_FALLBACKS")
    )
    """Comma-separated fallback ladder for model-specific failures."""

    timeout: float = Field(300.0, validation_alias=_env("TIMEOUT", "M2M_TIMEOUT"))
    """Seconds allowed for one model call."""

    render_timeout: float = Field(
        1800.0, validation_alias=_env("RENDER_TIMEOUT", "M2M_RENDER_TIMEOUT")
    )
    """Seconds allowed for one render, separate from the model-call timeout."""

    manim: str | None = Field(None, validation_alias=_env("MANIM", "M2M_MANIM"))
    """Override for the manim executable (default: this interpreter's `-m manim`)."""

    openai_base_url: str = Field(
        "http://127.0.0.1:8000/v1", validation_alias=_env("OPENAI_BASE_URL", "OPENAI_BASE_URL")
    )
    openai_api_key: str | None = Field(
        None, validation_alias=_env("OPENAI_API_KEY", "OPENAI_API_KEY")
    )

    # --- orchestration -------------------------------------------------------
    task_retries: int = Field(2, validation_alias=_env("TASK_RETRIES"))
    """Prefect retries for a task that hit a retriable backend error."""

    retry_delay_seconds: float = Field(2.0, validation_alias=_env("RETRY_DELAY_SECONDS"))
    turn_timeout: float = Field(300.0, validation_alias=_env("TURN_TIMEOUT"))
    """Seconds allowed for one learning turn of a sweep (the seed used 300)."""

    llm_concurrency: int = Field(4, validation_alias=_env("LLM_CONCURRENCY"))
    """Size of the global concurrency limit on tag `llm` created by `mythloop serve`."""

    regression_notify_block: str | None = Field(
        None, validation_alias=_env("REGRESSION_NOTIFY_BLOCK"))
    """A Prefect notification block (`<block type slug>/<block name>`, e.g.
    `slack-webhook/nightly`) the regression automation of `mythloop serve` sends through."""

    schedule_cron: str = Field("0 2 * * *", validation_alias=_env("SCHEDULE_CRON"))
    timezone: str = Field("UTC", validation_alias=_env("TIMEZONE"))
    nightly_noise_levels: Annotated[list[float], NoDecode] = Field(
        default_factory=list, validation_alias=_env("NIGHTLY_NOISE_LEVELS"))
    """Noise levels of the nightly sweep, comma-separated (`0,0.1,0.2,0.3,0.4`): two or more
    run a noise study (one sweep per level and a noise curve); empty runs one sweep."""

    @field_validator("nightly_noise_levels", mode="before")
    @classmethod
    def _split_levels(cls, value):
        if isinstance(value, str):
            return [float(part) for part in value.replace(",", " ").split()]
        return value

    @field_validator("model_fallbacks", mode="before")
    @classmethod
    def _split_fallbacks(cls, value):
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    # --- derived paths --------------------------------------------------------
    @property
    def state_root(self) -> Path:
        return self.state_dir.expanduser().resolve()

    @property
    def prefect_home(self) -> Path:
        return self.state_root / "prefect"

    @property
    def cache_dir(self) -> Path:
        return self.state_root / "cache"

    @property
    def models_dir(self) -> Path:
        """Tuned embedding models, content-addressed (mythloop/router/models.py)."""
        return self.state_root / "models"

    @property
    def resolved_store_path(self) -> Path:
        return (self.store_path or self.state_root / "store.db").expanduser().resolve()

    @property
    def resolved_verdict_embeddings(self) -> Path:
        if self.verdict_embeddings:
            return self.verdict_embeddings.expanduser().resolve()
        return self.resolved_store_path.with_name("verdicts.npz")

    @property
    def resolved_runs_dir(self) -> Path:
        return (self.runs_dir or self.state_root / "runs").expanduser().resolve()

    @property
    def resolved_results_dir(self) -> Path:
        return (self.results_dir or self.state_root / "results").expanduser().resolve()
