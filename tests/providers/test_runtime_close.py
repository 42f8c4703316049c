"""The runtime closes the HTTP providers of its agents before its I/O loop stops."""

from __future__ import annotations

from fake_openai import Reply
from provider_support import make_provider

from turnlog import Agent, Runtime, UserInput
from turnlog.domain import protocol as p


def test_closing_the_runtime_closes_its_providers(fake, dialect) -> None:
    fake.script(Reply(text="hello there"))
    provider = make_provider(dialect, fake.base_url)
    with Runtime.open("memory://") as rt:
        handle = rt.create_agent(Agent("a", model=provider), session_id="c")
        handle.submit(UserInput("hi"))
        while not isinstance(handle.next_event(timeout=10).msg, p.TurnCompletedMsg):
            pass
        assert provider._endpoint._client is not None
    # closed by Runtime.close(): no connection left open (filterwarnings=error
    # would fail this test on an unclosed transport)
    assert provider._endpoint._client is None
