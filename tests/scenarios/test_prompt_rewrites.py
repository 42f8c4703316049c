"""A user_prompt hook may rewrite input (issue 23, item 6).

The model, the context and ``messages()`` have the rewritten text; the log
records which hook rewrote it and, unless the hook said the original must
not be kept, the user's original too. A redacted original is stored
nowhere: no table of either store holds its bytes.
"""

from __future__ import annotations

import sqlite3
import threading
from contextlib import closing
from urllib.parse import parse_qs, urlsplit

import msgspec
import pytest

from turnlog import (
    Agent,
    HookResult,
    Message,
    Middleware,
    Runtime,
    ScriptedModel,
    TurnlogError,
)
from turnlog.store.transfer import export_session
from turnlog.testing import HeldModel

SECRET = "sk-live-5ecr3t-91c2"
REDACTED = "[redacted]"


class Redact(Middleware):
    """Rewrites the secret out of any input that carries it."""

    name = "redact"

    def __init__(self, *, keep_original: bool) -> None:
        self.keep_original = keep_original

    def user_prompt(self, info):
        if SECRET in info.text:
            return HookResult.rewrite_prompt(
                info.text.replace(SECRET, REDACTED), keep_original=self.keep_original
            )
        return None


class Seen(Middleware):
    """A hook listed after the rewriter: records the text it is shown."""

    name = "seen"

    def __init__(self) -> None:
        self.texts: list[str] = []

    def user_prompt(self, info):
        self.texts.append(info.text)


def agent(model, *, keep_original: bool, seen: Seen | None = None) -> Agent:
    layers = [Redact(keep_original=keep_original), seen or Seen()]
    return Agent("a", model=model, middleware=layers)


def user_texts(items) -> list[str]:
    return [
        i["content"]
        for i in items
        if i.get("type") == "message" and i.get("role") == "user"
    ]


def stored_rows_holding(store_url: str, text: str) -> list[str]:
    """The tables of the store (SQLite file or PostgreSQL schema) with
    ``text``'s bytes in any row."""
    needle = text.encode()

    def hit(row: tuple) -> bool:
        cells = [
            bytes(c) if isinstance(c, (bytes, memoryview)) else str(c).encode()
            for c in row
        ]
        return any(needle in cell for cell in cells)

    if store_url.startswith("sqlite:///"):
        with closing(sqlite3.connect(store_url.removeprefix("sqlite:///"))) as db:
            tables = [
                r[0]
                for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")
            ]
            return [
                t
                for t in tables
                if any(hit(r) for r in db.execute(f"SELECT * FROM {t}"))
            ]
    import psycopg
    from psycopg import sql

    parts = urlsplit(store_url)
    schema = parse_qs(parts.query)["schema"][0]
    with psycopg.connect(parts._replace(query="").geturl()) as db:
        tables = [
            r[0]
            for r in db.execute(
                "SELECT table_name FROM information_schema.tables "
                "WHERE table_schema = %s",
                (schema,),
            )
        ]
        found = []
        for table in tables:
            query = sql.SQL("SELECT * FROM {}.{}").format(
                sql.Identifier(schema), sql.Identifier(table)
            )
            if any(hit(r) for r in db.execute(query)):
                found.append(table)
        return found


def test_a_rewritten_prompt_reaches_the_model_and_the_log_keeps_both(
    store_url: str,
) -> None:
    original = f"deploy with key {SECRET}"
    rewritten = f"deploy with key {REDACTED}"
    model = ScriptedModel(["deployed"])
    seen = Seen()
    with Runtime.open(store_url) as rt:
        session = rt.create_session(
            agent(model, keep_original=True, seen=seen), session_id="s"
        )
        assert session.prompt(original, timeout=10).final_output == "deployed"

        (request,) = model.requests
        assert user_texts(request.items) == [rewritten]
        assert SECRET not in msgspec.json.encode(list(request.items)).decode()
        assert seen.texts == [rewritten]  # later hooks see the rewrite

        expected = [
            Message("user", rewritten, original=original),
            Message.assistant("deployed"),
        ]
        assert session.messages() == expected
        (item, _) = session.context()
        assert (item["content"], item["turnlog_rewritten_by"]) == (
            rewritten,
            ["redact"],
        )
        assert rt.checkpoints.load("s").messages() == expected

        log = b"\n".join(export_session(rt.store, "s")).decode()
        assert SECRET in log
        assert '"rewritten_by":["redact"]' in log

    with Runtime.open(store_url) as rt:
        reopened = rt.create_session(
            agent(ScriptedModel([]), keep_original=True), session_id="s"
        )
        assert reopened.messages() == expected


def test_a_redacted_original_is_stored_nowhere(store_url: str) -> None:
    model = HeldModel(ScriptedModel(["one", "two", "three", "four"]))
    with Runtime.open(store_url) as rt:
        session = rt.create_session(agent(model, keep_original=False), session_id="s")
        results: list = []
        worker = threading.Thread(
            target=lambda: results.append(
                session.prompt(f"prompt {SECRET}", timeout=30)
            )
        )
        worker.start()
        assert model.entered.wait(10)  # a turn runs: what follows is queued
        session.steer(f"steer {SECRET}")
        session.follow_up(f"follow-up {SECRET}")
        assert [q.text for q in session.queued()] == [
            f"steer {REDACTED}",
            f"follow-up {REDACTED}",
        ]
        model.release()
        worker.join(30)
        assert results[0].completed  # the steer and the follow-up ran in its run
        assert session.prompt("and plain text", timeout=10).completed

        sent = msgspec.json.encode([r.items for r in model.inner.requests]).decode()
        assert SECRET not in sent
        assert f"steer {REDACTED}" in sent
        texts = [m.content for m in session.messages() if m.role == "user"]
        assert texts == [
            f"prompt {REDACTED}",
            f"steer {REDACTED}",
            f"follow-up {REDACTED}",
            "and plain text",
        ]
        assert all(m.original is None for m in session.messages())
        assert rt.checkpoints.load("s").messages() == session.messages()
        log = b"\n".join(export_session(rt.store, "s")).decode()
        assert log.count('"rewritten_by":["redact"]') >= 3  # the fact is recorded
        assert SECRET not in log
    assert stored_rows_holding(store_url, SECRET) == []
    assert stored_rows_holding(store_url, f"follow-up {REDACTED}") != []  # it scans


def test_a_rewrite_that_is_not_text_fails_the_turn_and_records_nothing(
    store_url: str,
) -> None:
    class Bad(Middleware):
        def user_prompt(self, info):
            return HookResult(rewrite=42)  # type: ignore[arg-type]

    model = ScriptedModel(["never"])
    with Runtime.open(store_url) as rt:
        session = rt.create_session(
            Agent("a", model=model, middleware=[Bad()]), session_id="s"
        )
        result = session.prompt("hello", timeout=10)
        assert result.status == "failed"
        assert "rewrote the input badly" in (result.error or "")
        assert model.requests == []
        assert session.messages() == []
        with pytest.raises(TurnlogError, match="rewrote the input badly"):
            session.follow_up("queued")
        assert session.queued() == []
