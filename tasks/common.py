"""The project's Prefect task defaults, in one place.

Every mythloop task is a thin wrapper: its body is one call into the `mythloop`
library. This helper sets what they share: retries that fire only on
retriable backend errors, a timeout, the `llm` tag on model calls, JSON
results persisted to the Prefect home, and no input-hash caching (callers
that want caching pass an explicit policy).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent import futures
from typing import Any, ParamSpec, TypeVar

from prefect import Task, get_client, get_run_logger, task
from prefect.cache_policies import NO_CACHE, CachePolicy
from prefect.client.schemas.filters import (
    FlowRunFilter,
    FlowRunFilterId,
    FlowRunFilterParentFlowRunId,
    FlowRunFilterState,
    FlowRunFilterStateType,
)
from prefect.client.schemas.objects import StateType, TaskRun
from prefect.context import FlowRunContext, TaskRunContext
from prefect.futures import PrefectConcurrentFuture
from prefect.states import Crashed, State
from prefect.task_runners import ThreadPoolTaskRunner

from mythloop.llm import LLM_TAG, is_retriable
from mythloop.procs import STOPPING
from mythloop.settings import get_settings
from mythloop.textsafe import clean_line, clean_text

__all__ = ["mythloop_task", "retry_on_retriable", "LLM_TAG", "say", "run_logger_info", "TaskPool",
           "timeout_tag", "with_timeout", "told_by_the_flow", "ToldByTheFlow"]

P = ParamSpec("P")
R = TypeVar("R")


def say(message: str) -> None:
    """A console line for the person watching, as well as the Prefect log. The line may hold
    scene or model text (a label, an error): it is cleaned of escapes and control characters.
    Once a stop is under way (Ctrl-C, SIGTERM: `mythloop.procs.STOPPING`), the console gets no
    more of them: the command's one `interrupted; ...` line says it (the log still gets every
    line)."""
    message = clean_line(message, 8000)
    if not STOPPING.is_set():
        print(message, flush=True)
    try:
        get_run_logger().info(message)
    except Exception:  # outside a run context
        pass


class _RunLogText(logging.Filter):
    """Run log records carry scene and model text: a task's exception message and traceback
    (a scene's error, a model reply quoted in one), the lines `say` sends. Each record's
    message and exception text are cleaned (mythloop.textsafe) before any handler, the
    console's or the Prefect API's, sees them."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a record that does not format stays as it is
            return True
        record.msg, record.args = clean_text(message), ()
        if record.exc_info and record.exc_info[0] is not None:
            # a formatter prints exc_text, formatted once here; exc_info stays, for the
            # console filters that recognise an exception by its type (mythloop_app runtime)
            record.exc_text = clean_text(logging.Formatter().formatException(record.exc_info))
        elif record.exc_text:
            record.exc_text = clean_text(record.exc_text)
        if record.stack_info:
            record.stack_info = clean_text(record.stack_info)
        return True


_RUN_LOG_TEXT = _RunLogText()
# the loggers Prefect's flow and task runs (and their engines) log to; a filter on the logger
# runs before the record reaches any handler
_RUN_LOGGERS = ("prefect.flow_runs", "prefect.task_runs", "prefect.engine")
for _name in _RUN_LOGGERS:
    logging.getLogger(_name).addFilter(_RUN_LOG_TEXT)  # (the same filter is added once)


_TOLD: set[str] = set()  # task runs whose end the flow tells on the console in its own line
_TOLD_LOCK = threading.Lock()


def told_by_the_flow() -> None:
    """The current task run ends in a state the flow reads and tells on the console in its
    own line (a failed render: `[film] render-scene-01 -> scene error: ...`): the run's
    records (its error, Prefect's "Finished in state Failed") go to the API and the UI, not
    to a CLI's console (`ToldByTheFlow`, unless --verbose)."""
    context = TaskRunContext.get()
    if context is not None and context.task_run is not None:
        with _TOLD_LOCK:
            _TOLD.add(str(context.task_run.id))


class ToldByTheFlow(logging.Filter):
    """Console filter: drops the records of the task runs `told_by_the_flow` marked."""

    def filter(self, record: logging.LogRecord) -> bool:
        return str(getattr(record, "task_run_id", "")) not in _TOLD


def run_logger_info() -> Callable[[str], None] | None:
    """The run logger's `info` inside a flow or task run (a render's progress lines), else None."""
    try:
        return get_run_logger().info
    except Exception:  # noqa: BLE001 - no usable run context: stay quiet
        return None


def timeout_tag(seconds: float) -> str:
    """The tag that shows a task run's timeout in the UI (`timeout:600s`): Prefect's run page
    shows a task's tags and retries, not its timeout."""
    return f"timeout:{seconds:g}s"


def with_timeout(task: Task[P, R], seconds: float, *, enforced: bool = True,
                 **options: Any) -> Task[P, R]:
    """TASK with a timeout of SECONDS and its `timeout:...s` tag (replacing any other). With
    `enforced=False` the tag alone: the timeout is the step's own (a render's deadline, a
    model call's), not Prefect's, which cannot interrupt a task in a worker thread."""
    tags = {tag for tag in task.tags if not tag.startswith("timeout:")} | {timeout_tag(seconds)}
    if enforced:
        options["timeout_seconds"] = seconds
    return task.with_options(tags=tags, **options)


def retry_on_retriable(task: Task, task_run: TaskRun, state: State) -> bool:
    """Prefect `retry_condition_fn`: retry timeouts, rate limits, 5xx and network errors only.

    Authentication failures, broken scenes and programming errors fail at once.
    """
    try:
        state.result(raise_on_failure=True)
    except Exception as exc:  # the failed state re-raises the task's exception
        return is_retriable(exc)
    return False


def mythloop_task(
    *,
    name: str,
    timeout_seconds: float | None = None,
    retries: int | None = None,
    llm: bool = False,
    tags: tuple[str, ...] = (),
    task_run_name: str | Callable[..., str] | None = None,
    cache_policy: CachePolicy = NO_CACHE,
    **options: Any,
) -> Callable[[Callable[P, R]], Task[P, R]]:
    """`@task` with mythloop's defaults. `llm=True` marks a model call (tag `llm`); a task with
    a timeout carries it as a tag too (`timeout:600s`), so the UI shows it."""
    settings = get_settings()
    # Tags cost an API round trip per task run (one concurrency-limit lookup for all of a
    # run's tags), so only model calls and runs with a timeout carry any: `llm`, which
    # `mythloop serve` caps with a global limit, and `timeout:<seconds>s`.
    all_tags = set(tags)
    if llm:
        all_tags.add(LLM_TAG)
    if timeout_seconds is not None:
        all_tags.add(timeout_tag(timeout_seconds))
    if "cache_key_fn" not in options:  # a key function is its own cache policy
        options["cache_policy"] = cache_policy
    return task(
        name=name,
        task_run_name=task_run_name,
        retries=settings.task_retries if retries is None else retries,
        retry_delay_seconds=settings.retry_delay_seconds,
        retry_condition_fn=retry_on_retriable,
        timeout_seconds=timeout_seconds,
        tags=all_tags,
        persist_result=True,
        result_serializer="json",
        **options,
    )


class TaskPool:
    """Prefect's ThreadPoolTaskRunner for task runs side by side (a film's scenes, a sweep's
    shards), with Ctrl-C in mind: when the block ends on an exception (Ctrl-C, SIGTERM, a
    crash), no task run still queued ever starts, and the block does not wait for the runs
    under way (the runner's own exit would: a sandboxed render can take minutes; the CLI ends
    their child processes, and their steps see the stop). A flow may wait a bounded time for
    them (`settle`) and record what is still under way Crashed (`crash_under_way`)."""

    def __init__(self, max_workers: int) -> None:
        self.runner: ThreadPoolTaskRunner = ThreadPoolTaskRunner(max_workers=max_workers)
        self.futures: list[PrefectConcurrentFuture[Any]] = []

    def submit(self, task: Task[..., Any],
               parameters: dict[str, Any]) -> PrefectConcurrentFuture[Any]:
        future = self.runner.submit(task, parameters)
        self.futures.append(future)
        return future

    def __enter__(self) -> TaskPool:
        self.runner.__enter__()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: Any) -> None:
        if exc_type is None:
            self.runner.__exit__(None, None, None)  # every run is done by now
            return
        self.cancel_queued()

    def cancel_queued(self) -> None:
        """Queued runs never start; runs under way go on."""
        for future in self.futures:
            future.wrapped_future.cancel()

    def under_way(self) -> list[PrefectConcurrentFuture[Any]]:
        return [future for future in self.futures if future.wrapped_future.running()]

    def settle(self, timeout: float) -> bool:
        """On a stop: wait up to TIMEOUT for the runs under way to end (they see `STOPPING`
        and stop at their next step), so their final states are sent before the command
        flushes its events and stops its server. True when none is left running."""
        futures.wait([future.wrapped_future for future in self.under_way()], timeout=timeout)
        return not self.under_way()

    def stop_under_way(self, message: str, wait: float = 0.0) -> None:
        """On a stop: no queued run starts; the runs under way get up to WAIT seconds to end
        (`settle`); those still under way then are recorded Crashed (`crash_under_way`)."""
        self.cancel_queued()  # first: a run that ends frees a thread for no queued one
        if not self.settle(wait):
            self.crash_under_way(message)

    def crash_under_way(self, message: str) -> None:
        """Record the runs still under way Crashed, rather than leave them Running when the
        process ends: every Running task run of this flow run, the Running subflow runs it
        started (a sweep's shards), and the Running task runs inside those. A stop reaches
        the flow's thread, not the runs in the runner's threads."""
        context = FlowRunContext.get()
        if context is None or context.flow_run is None or not self.under_way():
            return
        running = FlowRunFilterState(type=FlowRunFilterStateType(any_=[StateType.RUNNING]))
        try:
            with get_client(sync_client=True) as client:
                subflows = [run.id for run in client.read_flow_runs(
                    flow_run_filter=FlowRunFilter(
                        parent_flow_run_id=FlowRunFilterParentFlowRunId(
                            any_=[context.flow_run.id]),
                        state=running))]
                inside = [run.id for run in client.read_task_runs(
                    flow_run_filter=FlowRunFilter(
                        id=FlowRunFilterId(any_=[context.flow_run.id, *subflows])), limit=200)
                    if run.state_type == StateType.RUNNING]
                for task_run_id in inside:
                    client.set_task_run_state(task_run_id, Crashed(message=message), force=True)
                for flow_run_id in subflows:
                    client.set_flow_run_state(flow_run_id, Crashed(message=message),
                                              force=True)
        except Exception:  # noqa: BLE001 - the API may be going away too; the stop goes on
            pass
