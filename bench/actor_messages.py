"""Actor messages a turn, counted as issue 12 counted them.

A wrapper around every ``tell`` and ``ask`` (pykka's ``ActorRef`` and
turnlog's ``LoopActorRef``) counts the messages of one session running
``--turns`` turns of one tool call each on ``memory://``; prints the mean
a turn and how many of each message type were sent.

Run: python bench/actor_messages.py [--turns 20]
"""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Callable
from typing import Any

import pykka

from turnlog import Agent, Runtime, ScriptedModel, calls, function_tool, tool_call
from turnlog.actors.loop_actor import LoopActorRef

SENT: Counter[str] = Counter()


def counted(send: Callable[..., Any]) -> Callable[..., Any]:
    """``send`` (a tell or an ask), counting each message by its type."""

    def wrapper(self: Any, message: Any, *args: Any, **kwargs: Any) -> Any:
        SENT[type(message).__name__] += 1
        return send(self, message, *args, **kwargs)

    return wrapper


@function_tool
def echo(text: str) -> str:
    """Returns its argument."""
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=20)
    args = parser.parse_args()
    model = ScriptedModel()
    for _ in range(args.turns):
        model.add(calls(tool_call("echo", {"text": "hi"})), "done")
    agent = Agent("bench", model=model, tools=[echo])
    with Runtime.open("memory://") as rt:
        session = rt.create_session(agent, session_id="bench")
        pykka.ActorRef.tell = counted(pykka.ActorRef.tell)  # type: ignore[method-assign]
        pykka.ActorRef.ask = counted(pykka.ActorRef.ask)  # type: ignore[method-assign]
        LoopActorRef.tell = counted(LoopActorRef.tell)  # type: ignore[method-assign]
        for turn in range(args.turns):
            result = session.prompt(f"turn {turn}", timeout=30)
            assert result.final_output == "done", result
        sent = dict(SENT)
    total = sum(sent.values())
    print(f"turns: {args.turns}, actor messages: {total}")
    print(f"actor messages a turn: {total / args.turns:.1f}")
    for name, count in sorted(sent.items(), key=lambda kv: -kv[1]):
        print(f"  {name}: {count / args.turns:.2f} a turn")


if __name__ == "__main__":
    main()
