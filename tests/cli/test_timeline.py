"""The audit timeline says what each event means: routes and usage of model
steps, who decided an approval and how long it waited, compaction, queued
input and hook context."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from turnlog import (
    Agent,
    ApprovalDecision,
    Compaction,
    HookResult,
    Middleware,
    RunConfig,
    Runtime,
    ScriptedModel,
    calls,
    function_tool,
    tool_call,
)
from turnlog.cli.timeline import Seen, format_duration, summarize
from turnlog.domain import compaction as c
from turnlog.domain import jobs as j
from turnlog.domain import session as s
from turnlog.domain import turn_events as t

TIME = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"
AUDIT_LINE = re.compile(rf"^\s*(\d+)  ({TIME})  (\w+)\s+(.*)$")
START = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)


def summaries(out: str) -> list[tuple[str, str]]:
    """(event name, summary) of every line of an audit."""
    lines = []
    for line in out.splitlines()[1:]:
        match = AUDIT_LINE.match(line)
        assert match is not None, line
        lines.append((match[3], match[4]))
    return lines


def summary_of(out: str, name: str) -> list[str]:
    return [summary for event, summary in summaries(out) if event == name]


class BudgetNote(Middleware):
    name = "budget"

    def pre_model(self, info):
        return HookResult.add_context("remember the budget")


class Provider:
    """Allows every tool for the rest of the session."""

    def decide(self, request):
        return ApprovalDecision.allow_session()


@function_tool(needs_approval=True)
def deploy(target: str) -> str:
    """Deploys."""
    return f"deployed {target}"


def test_compaction_hooks_and_approvals_read_well(turnlog, sqlite_url: str) -> None:
    model = ScriptedModel(["SUMMARY: the user said hello", "answer after summary"])
    deployer = ScriptedModel(
        [calls(tool_call("deploy", {"target": "prod"})), "deployed"]
    )
    config = RunConfig(approval_provider=Provider())
    with Runtime.open(sqlite_url, run_config=config) as runtime:
        compacting = runtime.create_session(
            Agent("a", model=model, middleware=[Compaction(1)]), session_id="c"
        )
        assert compacting.prompt("hello there", timeout=10).completed
        deploying = runtime.create_session(
            Agent("d", model=deployer, tools=[deploy], middleware=[BudgetNote()]),
            session_id="d",
        )
        assert deploying.prompt("ship it", timeout=10).completed

    compacted = turnlog("--store", sqlite_url, "audit", "c")
    deployed = turnlog("--store", sqlite_url, "audit", "d")

    assert compacted.code == deployed.code == 0
    (started,) = summary_of(compacted.out, "CompactionStarted")
    compaction = re.fullmatch(r"compaction (\S+) started: .+", started)
    assert compaction is not None, started
    (done,) = summary_of(compacted.out, "ContextCompacted")
    assert re.fullmatch(
        rf"compaction {compaction[1]} done: the context is now \d+ item\(s\), "
        r"usage .+",
        done,
    ), done
    assert summary_of(compacted.out, "ContextRewritten") == [
        "context epoch 1 starts in turn 1 (compaction)"
    ]
    kinds = [u.split(",")[0] for u in summary_of(compacted.out, "UsageRecorded")]
    assert kinds == ["compaction call", "model call"]

    assert re.fullmatch(
        r'hook \w+ added context "remember the budget"',
        summary_of(deployed.out, "HookContextAdded")[0],
    )
    (requested,) = summary_of(deployed.out, "ApprovalRequested")
    request = re.fullmatch(r'deploy \{"target": "prod"\} \(request (\S+)\)', requested)
    assert request is not None, requested
    (decided,) = summary_of(deployed.out, "ApprovalDecided")
    assert re.fullmatch(
        rf"deploy: allow_session by (\S+), waited \d+ ms \(request {request[1]}\)",
        decided,
    ), decided
    assert summary_of(deployed.out, "ToolAllowedForSession") == [
        f"deploy needs no approval for the rest of the session (request {request[1]})"
    ]


def event(cls, *, seconds: float = 0, **fields):
    return cls(
        originator_id=uuid.UUID(int=7),
        originator_version=2,
        timestamp=START + timedelta(seconds=seconds),
        session_id="s",
        **fields,
    )


@pytest.mark.parametrize(
    ("domain_event", "summary"),
    [
        (
            event(
                s.InputQueued,
                submission_id="sub1",
                kind="follow_up",
                text="and then?",
                attachments=[],
            ),
            'follow_up "and then?" queued to run after the current turn '
            "(submission sub1)",
        ),
        (
            event(
                s.InputQueued,
                submission_id="sub2",
                kind="steer",
                text="use [redacted]",
                attachments=[],
                rewritten_by=["redact"],
            ),
            'steer "use [redacted]" (rewritten by redact; the original was not '
            "kept) queued to run after the current turn (submission sub2)",
        ),
        (
            event(
                t.InputAccepted,
                submission_id="sub3",
                kind="prompt",
                text="Deploy it.",
                attachments=[],
                rewritten_by=["spell", "tone"],
                original_text="deploi it",
            ),
            'prompt "Deploy it." (rewritten by spell, tone from "deploi it")',
        ),
        (
            event(s.QueuedInputDropped, submission_ids=["a", "b"], reason="interrupt"),
            "2 queued input(s) dropped: interrupt (a, b)",
        ),
        (
            event(s.QueuedInputTaken, submission_id="a", turn_id="t"),
            "queued submission a taken into the running turn",
        ),
        (
            event(
                j.JobStarted,
                job_id="job_1",
                name="build",
                turn_id="t",
                call_id="c1",
                tool="build",
                idempotent=False,
                arguments=[],
            ),
            "job job_1 (build) started by call c1",
        ),
        (
            event(
                j.JobFinished,
                job_id="job_1",
                name="build",
                output="interrupted; outcome unknown",
                is_error=True,
                interrupted=True,
            ),
            'job job_1 (build) interrupted: "interrupted; outcome unknown"',
        ),
        (
            event(
                t.ToolCallFinished,
                call_id="c2",
                name="deploy",
                output="skipped: the user steered the turn before this call started",
                is_error=True,
                skipped="steered",
            ),
            "deploy skipped, not run (steered)",
        ),
        (
            event(s.ToolAllowedForSession, tool_name="deploy", request_id="r1"),
            "deploy needs no approval for the rest of the session (request r1)",
        ),
        (
            event(
                s.UsageRecorded,
                turn_id="t",
                step=3,
                route="fast",
                kind="compaction",
                usage={"input_tokens": 5},
            ),
            "compaction call, step 3, route fast, usage in=5",
        ),
        (
            event(
                s.UsageRecorded,
                turn_id="t",
                step=1,
                route="default",
                kind="model",
                usage=None,
            ),
            "model call, step 1, route default, usage unreported",
        ),
        (
            event(c.CompactionStarted, compaction_id="c1", reason="context too long"),
            "compaction c1 started: context too long",
        ),
        (
            event(c.CompactionFailed, compaction_id="c1", message="endpoint down"),
            "compaction c1 failed, context unchanged: endpoint down",
        ),
        (
            event(c.CompactionCancelled, compaction_id="c1"),
            "compaction c1 cancelled, context unchanged",
        ),
        (
            event(
                c.ContextCompacted,
                compaction_id="c1",
                items=[{"type": "compaction"}],
                usage=None,
            ),
            "compaction c1 done: the context is now 1 item(s), usage unreported",
        ),
        (
            event(s.ContextRewritten, turn_number=4, reasons=[]),
            "context epoch 0 starts in turn 4 (no reason given)",
        ),
        (
            event(t.HookContextAdded, hook="guard", text="be\x1b[31m careful"),
            r'hook guard added context "be\x1b[31m careful"',
        ),
    ],
    ids=lambda value: type(value).__name__ if not isinstance(value, str) else "",
)
def test_each_event_has_a_readable_summary(domain_event, summary: str) -> None:
    assert summarize(domain_event) == summary


def test_the_timeline_remembers_routes_requests_and_epochs() -> None:
    seen = Seen()
    steps = [
        event(t.ModelStepStarted, step=1, route="fast"),
        event(t.ModelStepCompleted, step=1, output=[], usage=None, diagnostics={}),
        event(t.ModelStepStarted, step=2, route="smart"),
        event(t.ModelStepFailed, step=2, error_type="ProviderError", message="down"),
        event(
            t.ApprovalRequested,
            request_id="r1",
            call_id="c",
            name="deploy",
            arguments="{}",
        ),
        event(
            t.ApprovalDecided,
            seconds=125.5,
            request_id="r1",
            call_id="c",
            decision="deny",
            decided_by="user",
        ),
        event(s.ContextRewritten, turn_number=2, reasons=["compaction"]),
        event(s.ContextRewritten, turn_number=5, reasons=["compaction", "route"]),
    ]
    lines = []
    for step in steps:
        seen.note(step)
        lines.append(summarize(step, seen))

    assert lines == [
        "step 1, route fast",
        "step 1, route fast, usage unreported",
        "step 2, route smart",
        "step 2, route smart, ProviderError: down",
        "deploy {} (request r1)",
        "deploy: deny by user, waited 2 min 05 s (request r1)",
        "context epoch 1 starts in turn 2 (compaction)",
        "context epoch 2 starts in turn 5 (compaction, route)",
    ]
    # Without what came before, a decision still names who decided.
    assert summarize(steps[5]) == "deny by user (request r1)"


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.0004, "0 ms"),
        (0.25, "250 ms"),
        (12.34, "12.3 s"),
        (61, "1 min 01 s"),
        (3 * 3600 + 125, "3 h 02 min"),
    ],
)
def test_durations_read_like_a_person_would_say_them(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text
