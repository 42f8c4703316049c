"""Seed scenarios from ../shared/seeds/000_8fbdb16dfc52d034.txt (issue 2 part).

A "session storage seeded with items" is a log that already holds the
session: an earlier runtime ran it and closed.
"""

from __future__ import annotations

from turnlog import (
    Agent,
    Message,
    ProviderError,
    RunConfig,
    RunEvent,
    RunFinished,
    RunStarted,
    Runtime,
    ScriptedModel,
)


def seed_log(url: str, session_id: str, prompt: str, model: ScriptedModel) -> None:
    with Runtime.open(url) as rt:
        session = rt.create_session(
            Agent("assistant", model=model), session_id=session_id
        )
        session.prompt(prompt, timeout=10)


def test_session_preserves_id_hydrates_messages_shared_state_and_events(
    store_url: str,
) -> None:
    seed_log(
        store_url,
        "desktop-session-1",
        "earlier question",
        ScriptedModel(["earlier answer"]),
    )
    model = ScriptedModel(["current answer"])
    agent = Agent("assistant", model=model, instructions="Be brief.")
    with Runtime.open(store_url) as rt:
        session = rt.create_session(
            agent, session_id="desktop-session-1", shared_state={"host": "desktop"}
        )
        events = session.subscribe()
        assert session.session_id == "desktop-session-1"
        assert len(session.messages()) == 2

        result = session.prompt("current question", timeout=10)

        assert result.final_output == "current answer"
        assert result.shared_state["host"] == "desktop"
        assert any(m.content == "current question" for m in session.messages())
        assert session.shared_state()["host"] == "desktop"
        assert session.shared_state()["todo_list"] == []
        latest = session.latest_run()
        assert latest is not None
        assert latest.final_output == "current answer"
        assert not session.running()
        assert session.active_run_handle() is None

        drained = events.drain()
        first = drained[0]
        assert isinstance(first, RunStarted)
        assert first.session_id == "desktop-session-1"
        assert any(
            isinstance(e, RunEvent)
            and e.session_id == "desktop-session-1"
            and e.event.session_id == "desktop-session-1"
            for e in drained
        )
        assert any(
            isinstance(e, RunFinished)
            and e.session_id == "desktop-session-1"
            and e.status == "completed"
            for e in drained
        )

        checkpoint = rt.checkpoints.load("desktop-session-1")
        assert checkpoint is not None
        stored = checkpoint.messages()
        assert session.messages() == stored
        assert session.messages()[0].role != "system"
        assert Message.user("current question") in stored
        assert any("current answer" in m.content for m in stored)
        # the model saw the hydrated history, not only the new question
        assert [i["content"] for i in model.requests[0].items] == [
            "earlier question",
            "earlier answer",
            "current question",
        ]


def test_run_config_session_is_used_when_options_session_is_absent(
    store_url: str,
) -> None:
    seed_log(
        store_url,
        "run-config-session",
        "stored",
        ScriptedModel([ProviderError("the model is down")]),
    )
    config = RunConfig(session_id="run-config-session")
    with Runtime.open(store_url, run_config=config) as rt:
        session = rt.create_session(Agent("assistant", model=ScriptedModel(["done"])))
        assert session.session_id == "run-config-session"
        assert session.messages() == [Message.user("stored")]
