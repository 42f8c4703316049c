"""The agent's digest is kept between calls, and still follows its router."""

from __future__ import annotations

from turnlog import Agent, ModelRouter, ScriptedModel


def test_a_route_registered_after_the_first_digest_changes_it() -> None:
    model = ScriptedModel(["x"])
    router = ModelRouter("main", model)
    agent = Agent("a", model=router)
    before = agent.digest()
    assert agent.digest() == before  # kept, not made again
    router.register("other", model)
    after = agent.digest()
    assert after != before
    assert (
        after
        == Agent(
            "a", model=ModelRouter("main", model).register("other", model)
        ).digest()
    )
