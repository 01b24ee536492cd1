"""The self-evaluation contract text given to the model (agents/self-eval-contract.md)."""

from __future__ import annotations

from mythloop.data import agents_dir

__all__ = ["render_self_eval_contract", "CONTRACT_FILE"]

CONTRACT_FILE = "self-eval-contract.md"


def render_self_eval_contract() -> str:
    """The contract text, read fresh from the agents folder."""
    path = agents_dir() / CONTRACT_FILE
    try:
        return path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        raise FileNotFoundError(
            f"self-evaluation contract {path} is missing: restore agents/{CONTRACT_FILE} "
            "from the source checkout"
        ) from None
