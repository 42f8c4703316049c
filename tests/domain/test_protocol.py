"""The wire protocol: Ops and Events round-trip through JSON unchanged."""

from __future__ import annotations

import json

import msgspec
import pytest

from turnlog.domain import protocol as p


@pytest.mark.parametrize(
    "op",
    [
        p.UserInput("hi", (p.SessionFileReference("f1", "a.txt", 3, "text/plain"),)),
        p.UserInput("plain"),
        p.Interrupt("turn-1"),
        p.Interrupt(),
        p.ApprovalResponse("r1", "allow_session"),
        p.Shutdown(),
    ],
)
def test_ops_round_trip_through_json(op: p.Op) -> None:
    data = p.encode_json(op)
    assert json.loads(data)["type"] == type(op).__struct_config__.tag
    assert p.decode_op(data) == op


@pytest.mark.parametrize(
    "msg",
    [
        p.TurnStartedMsg("t1", 1),
        p.InputAcceptedMsg("hi", "prompt"),
        p.AgentMessageMsg("hello"),
        p.ToolCallStartedMsg("c1", "add", '{"a":1}'),
        p.ToolCallFinishedMsg("c1", "add", "2", False),
        p.UsageRecordedMsg("default", "model", None, {"total_tokens": 3}),
        p.ModelStepCompletedMsg(1, {"input_tokens": 1}, {"route": "default"}),
        p.TurnAbortedMsg("t1", "interrupted", False),
        p.TurnCompletedMsg("t1", None),
        p.SharedStateUpdatedMsg({"k": [1, {"_type_": "datetime", "_data_": "x"}]}),
        p.JobStartedMsg("job_1", "build", "c1"),
        p.JobFinishedMsg("job_1", "build", "interrupted", True, interrupted=True),
    ],
)
def test_events_round_trip_through_json(msg: p.EventMsg) -> None:
    event = p.Event("s1", "sub-1", "t1", 7, msg)
    assert p.decode_event(p.encode_json(event)) == event


def test_tags_are_snake_case_and_unique() -> None:
    tags = [t.__struct_config__.tag for t in p.EventMsg.__args__]  # type: ignore[attr-defined]
    assert len(tags) == len(set(tags))
    assert all(tag == tag.lower() and " " not in tag for tag in tags)


def test_a_malformed_op_is_refused_with_a_validation_error() -> None:
    with pytest.raises(msgspec.ValidationError):
        p.decode_op(b'{"type": "user_input"}')
    with pytest.raises(msgspec.ValidationError):
        p.decode_op(b'{"type": "launch_missiles"}')
