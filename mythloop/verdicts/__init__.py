"""Verdicts: tag parser, self-eval contract, SQLite store, status rules."""

from mythloop.verdicts.contract import render_self_eval_contract
from mythloop.verdicts.persist import PersistResult, persist_verdicts, reason_problem
from mythloop.verdicts.status import STATUSES, VERDICTS, Counters, apply_verdict, next_status
from mythloop.verdicts.store import StoreSnapshot, VerdictIn, VerdictOutcome, VerdictStore
from mythloop.verdicts.tags import count_malformed_tags, parse_tags, scan_tags

__all__ = [
    "STATUSES", "VERDICTS", "Counters", "PersistResult", "StoreSnapshot", "VerdictIn",
    "VerdictOutcome", "VerdictStore", "apply_verdict", "count_malformed_tags", "next_status",
    "parse_tags", "persist_verdicts", "reason_problem", "render_self_eval_contract", "scan_tags",
]
