"""Sweep analysis: metrics with 95% intervals (the prompt as the unit), figures, report.md and metrics.json."""

from mythloop.analysis.compute import compute_metrics
from mythloop.analysis.core import AnalysisResult, analyze
from mythloop.analysis.load import AnalysisError, DataIssue, PromptInfo, SweepResults, load_results

__all__ = [
    "AnalysisError",
    "AnalysisResult",
    "DataIssue",
    "PromptInfo",
    "SweepResults",
    "analyze",
    "compute_metrics",
    "load_results",
]
