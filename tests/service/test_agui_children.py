"""AG-UI over a session whose tool runs a child session: the child's
approval ends the run with an interrupt naming the child, and resuming it
lets the parent's run finish."""

from __future__ import annotations

from ag_ui.core import EventType
from service_agents import delegating_agent
from test_agui import interrupted, new_session, resume


def test_a_childs_approval_is_an_interrupt_and_a_resume_finishes_the_run(
    serve,
) -> None:
    served = serve(agents={"lead": delegating_agent})
    with served.client() as client:
        thread = new_session(client, "lead")
        events, interrupt = interrupted(client, thread)
        starts = [
            e.tool_call_name for e in events if e.type == EventType.TOOL_CALL_START
        ]
        assert starts == ["research"]
        assert interrupt.reason == "tool_approval"
        assert interrupt.metadata == {
            "toolName": "publish",
            "arguments": {"text": "hello"},
            "sessionId": f"{thread}:1:ask",
        }
        rest = resume(
            client,
            thread,
            {
                "interruptId": interrupt.id,
                "status": "resolved",
                "payload": {"decision": "allow"},
            },
        )
    result = next(e for e in rest if e.type == EventType.TOOL_CALL_RESULT)
    assert result.content == "All done: counted and published."
    assert rest[-1].type == EventType.RUN_FINISHED
    assert rest[-1].outcome is None
    assert rest[-1].result == "The researcher is done."
