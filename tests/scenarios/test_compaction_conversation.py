"""Compaction keeps the conversation (issue 23, item 5).

``session.messages()`` is the conversation as it happened, across a
compaction; ``session.context()`` is what the model is sent: the user's
most recent messages within ``keep_user_tokens``, then the summary, an
item of its own kind that is never one of the user's messages.
"""

from __future__ import annotations

import msgspec
import pytest

from turnlog import (
    Agent,
    Compaction,
    InvalidInputError,
    Message,
    Runtime,
    ScriptedModel,
)

# Each prompt is 50 tokens by the estimate (200 bytes, four a token): the
# context passes the threshold with the third, and a budget of 100 tokens
# keeps the last two of them.
FIRST, SECOND, THIRD = "a" * 200, "b" * 200, "c" * 200
CONVERSATION = [
    Message.user(FIRST),
    Message.assistant("one"),
    Message.user(SECOND),
    Message.assistant("two"),
    Message.user(THIRD),
    Message.assistant("three"),
]


def agent(model: ScriptedModel) -> Agent:
    return Agent("a", model=model, middleware=[Compaction(150, keep_user_tokens=100)])


def run_three_turns(rt: Runtime, model: ScriptedModel) -> None:
    session = rt.create_session(agent(model), session_id="s")
    for text in (FIRST, SECOND, THIRD):
        assert session.prompt(text, timeout=10).status == "completed"
    assert rt.checkpoints.load("s").compaction_count == 1


def user_texts(items) -> list[str]:
    return [
        i["content"]
        for i in items
        if i.get("type") == "message" and i.get("role") == "user"
    ]


def summaries(items) -> list[dict]:
    return [i for i in items if i.get("turnlog_kind") == "compaction_summary"]


def test_compaction_keeps_the_conversation_and_shows_the_context_apart(
    store_url: str,
) -> None:
    model = ScriptedModel(["one", "two", "SUMMARY of a and b", "three"])
    with Runtime.open(store_url) as rt:
        run_three_turns(rt, model)
        session = rt.create_session(agent(model), session_id="s")
        assert session.messages() == CONVERSATION

        context = session.context()
        # The user's own most recent messages, kept as they wrote them, then
        # the summary: a developer item of its own kind, not a user message.
        assert user_texts(context) == [SECOND, THIRD]
        (summary,) = summaries(context)
        assert summary["role"] == "developer"
        assert summary["content"].endswith("\nSUMMARY of a and b")
        assert "not the user's words" in summary["content"]
        assert not any("SUMMARY" in text for text in user_texts(context))
        assert context[-1] == {
            "type": "message",
            "role": "assistant",
            "content": "three",
        }

        checkpoint = rt.checkpoints.load("s")
        assert checkpoint is not None
        assert checkpoint.messages() == CONVERSATION
        assert list(checkpoint.context) == context
        at_three = rt.checkpoints.at("s", turn=3)
        assert at_three is not None
        assert at_three.messages() == CONVERSATION
        at_two = rt.checkpoints.at("s", turn=2)
        assert at_two is not None
        assert at_two.messages() == CONVERSATION[:4]

        # The model's request after compaction: the kept user messages, and
        # the summary, not as something the user said.
        answer_request = model.requests[-1]
        assert user_texts(answer_request.items) == [SECOND, THIRD]
        assert [s["role"] for s in summaries(answer_request.items)] == ["developer"]

    with Runtime.open(store_url) as rt:
        reopened = rt.create_session(agent(ScriptedModel([])), session_id="s")
        assert reopened.messages() == CONVERSATION
        assert reopened.context() == context
        assert rt.checkpoints.load("s").messages() == CONVERSATION


def test_after_a_default_compaction_messages_are_not_the_summary(
    store_url: str,
) -> None:
    # Only what main had: Compaction(threshold), messages(), the checkpoint.
    model = ScriptedModel(["one", "two", "SUMMARY of a and b", "three"])
    with Runtime.open(store_url) as rt:
        session = rt.create_session(
            Agent("a", model=model, middleware=[Compaction(150)]), session_id="s"
        )
        for text in (FIRST, SECOND, THIRD):
            session.prompt(text, timeout=10)
        assert session.messages() == CONVERSATION
        assert rt.checkpoints.load("s").messages() == CONVERSATION
        sent_by_user = user_texts(model.requests[-1].items)
        assert not any("SUMMARY" in text for text in sent_by_user)
        assert sent_by_user[-1] == THIRD


def test_the_conversation_grows_past_a_compaction_in_a_live_session(
    store_url: str,
) -> None:
    model = ScriptedModel(["one", "two", "SUMMARY", "three", "SUMMARY 2", "four"])
    with Runtime.open(store_url) as rt:
        session = rt.create_session(agent(model), session_id="s")
        for text in (FIRST, SECOND, THIRD):
            session.prompt(text, timeout=10)
        assert session.messages() == CONVERSATION  # read from the log once
        session.prompt("d", timeout=10)  # compacts again, then answers
        expected = [*CONVERSATION, Message.user("d"), Message.assistant("four")]
        assert session.messages() == expected
        assert rt.checkpoints.load("s").messages() == expected
        # The second compaction keeps the user's messages (the oldest kept
        # cut short at the budget), never the first summary.
        kept = user_texts(session.context())
        assert kept[1:] == [THIRD, "d"]
        assert kept[0].startswith("b" * 196)
        assert kept[0].endswith("by compaction]")
        assert len(summaries(session.context())) == 1


def test_a_budget_of_zero_keeps_only_the_summary(store_url: str) -> None:
    model = ScriptedModel(["one", "SUMMARY", "two"])
    compaction = Compaction(100, keep_user_tokens=0)
    with Runtime.open(store_url) as rt:
        session = rt.create_session(
            Agent("a", model=model, middleware=[compaction]), session_id="s"
        )
        session.prompt(FIRST, timeout=10)
        session.prompt(SECOND, timeout=10)
        assert user_texts(session.context()) == []
        assert len(summaries(session.context())) == 1
        assert [m.content for m in session.messages()] == [FIRST, "one", SECOND, "two"]


def test_the_message_that_crosses_the_budget_is_cut_short(store_url: str) -> None:
    model = ScriptedModel(["one", "two", "SUMMARY", "three"])
    compaction = Compaction(150, keep_user_tokens=70)
    with Runtime.open(store_url) as rt:
        session = rt.create_session(
            Agent("a", model=model, middleware=[compaction]), session_id="s"
        )
        for text in (FIRST, SECOND, THIRD):
            session.prompt(text, timeout=10)
        kept = user_texts(session.context())
        assert kept[1] == THIRD
        assert kept[0].startswith("b" * 80)
        assert not kept[0].startswith("b" * 81)
        assert "left out by compaction" in kept[0]
        assert session.messages() == CONVERSATION


@pytest.mark.parametrize("budget", [-1, 1.5, True, "10"])
def test_a_bad_budget_is_refused(budget: object) -> None:
    with pytest.raises(InvalidInputError, match="keep_user_tokens"):
        Compaction(100, keep_user_tokens=budget)  # type: ignore[arg-type]


def test_the_checkpoint_encodes_its_conversation(store_url: str) -> None:
    model = ScriptedModel(["one", "two", "SUMMARY", "three"])
    with Runtime.open(store_url) as rt:
        run_three_turns(rt, model)
        doc = msgspec.json.decode(msgspec.json.encode(rt.checkpoints.load("s")))
        assert [m["content"] for m in doc["conversation"]] == [
            m.content for m in CONVERSATION
        ]


def test_a_rewind_past_a_compaction_leaves_the_conversation_before_it(
    store_url: str,
) -> None:
    model = ScriptedModel(["one", "two", "SUMMARY", "three", "SUMMARY 2", "again"])
    with Runtime.open(store_url) as rt:
        run_three_turns(rt, model)
        session = rt.create_session(agent(model), session_id="s")
        assert session.rewind(after_turn=2) == [3]
        assert session.messages() == CONVERSATION[:4]
        assert summaries(session.context()) == []  # the compaction was in turn 3
        # Compacts again (the context is back over the threshold), then answers.
        assert session.prompt("d" * 200, timeout=10).final_output == "again"
        expected = [
            *CONVERSATION[:4],
            Message.user("d" * 200),
            Message.assistant("again"),
        ]
        assert session.messages() == expected
        assert rt.checkpoints.load("s").messages() == expected
        fork = rt.fork_session("s", session_id="f", agent=agent(model))
        assert fork.messages() == expected
