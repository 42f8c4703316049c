"""A turnlog process with a typed agent, for the typed-answer crash tests.

Usage: python typed_child.py STORE_URL SESSION_ID MODE
  answered   run one turn to a typed answer, print DONE, wait to be killed
  mid-retry  the first answer is invalid; the retry's model call prints
             RETRYING and blocks, so the parent kills it mid-retry
"""

from __future__ import annotations

import sys
import threading

import pydantic

from turnlog import Agent, Runtime, ScriptedModel

never = threading.Event()


class Forecast(pydantic.BaseModel):
    city: str
    celsius: float


def blocked(_request: object) -> str:
    print("RETRYING", flush=True)
    never.wait()
    return "unreachable"


def main() -> None:
    url, session_id, mode = sys.argv[1:4]
    rt = Runtime.open(url)
    if mode == "answered":
        model = ScriptedModel([Forecast(city="Oslo", celsius=-3.5)])
        agent = Agent("forecaster", model=model, output_type=Forecast)
        session = rt.create_session(agent, session_id=session_id)
        session.prompt("weather in Oslo?", timeout=30)
        print("DONE", flush=True)
    elif mode == "mid-retry":
        model = ScriptedModel(['{"city": "Oslo"}', blocked])
        agent = Agent("forecaster", model=model, output_type=Forecast)
        session = rt.create_session(agent, session_id=session_id)
        session.prompt("weather in Oslo?", timeout=30)
    never.wait()


if __name__ == "__main__":
    main()
