"""A typed answer over HTTP: ``?wait=true``, ``GET /sessions/{id}`` and the
executions report return the recorded answer as ``output`` (and say
nothing of it for an agent without an ``output_type``). Both stores."""

from __future__ import annotations

import pydantic
from service_support import TOKEN_A, TOKENS
from starlette.testclient import TestClient

from turnlog import Agent, Runtime, ScriptedModel
from turnlog.service import create_app


class Forecast(pydantic.BaseModel):
    city: str
    celsius: float


RECORDED = {"city": "Oslo", "celsius": -3.0}


def typed_agent() -> Agent:
    model = ScriptedModel(['{"city": "Oslo"}', '{"city": "Oslo", "celsius": -3}'])
    return Agent("forecaster", model=model, output_type=Forecast)


def plain_agent() -> Agent:
    return Agent("plain", model=ScriptedModel(["just words"]))


AGENTS = {"forecaster": typed_agent, "plain": plain_agent}
HEADERS = {"Authorization": f"Bearer {TOKEN_A}"}


def prompt_and_read(store_url: str, agent: str) -> tuple[dict, dict, dict]:
    with Runtime.open(store_url) as runtime:
        app = create_app(runtime, AGENTS, TOKENS)
        with TestClient(app, headers=HEADERS) as client:
            created = client.post("/sessions", json={"agent": agent})
            session_id = created.json()["session_id"]
            base = f"/sessions/{session_id}"
            run = client.post(
                f"{base}/prompts", params={"wait": "true"}, json={"text": "weather?"}
            )
            assert run.status_code == 200, run.text
            checkpoint = client.get(base)
            executions = client.get(f"{base}/executions")
            assert checkpoint.status_code == executions.status_code == 200
            return run.json(), checkpoint.json(), executions.json()


def test_a_typed_answer_is_returned_as_output_everywhere(store_url: str) -> None:
    run, checkpoint, executions = prompt_and_read(store_url, "forecaster")
    assert run["status"] == "completed"
    assert run["output"] == RECORDED
    assert run["final_output"] == '{"city": "Oslo", "celsius": -3}'
    assert "typed_output" not in run
    assert "output_json" not in run
    assert checkpoint["output"] == RECORDED
    (turn,) = executions["turns"]
    assert turn["output"] == RECORDED
    assert turn["model_calls"] == 2  # the first answer went back


def test_an_untyped_session_says_nothing_of_output(store_url: str) -> None:
    run, checkpoint, executions = prompt_and_read(store_url, "plain")
    assert run["final_output"] == "just words"
    assert "output" not in run
    assert "output" not in checkpoint
    assert "output" not in executions["turns"][0]


def test_an_agui_run_of_a_typed_agent_finishes_with_the_answer_object(
    serve,
) -> None:
    from test_agui import new_session, run

    served = serve(agents=AGENTS)
    with served.client() as client:
        thread = new_session(client, "forecaster")
        events = run(client, thread, prompt="weather?")
    assert events[-1].type.value == "RUN_FINISHED"
    assert events[-1].result == RECORDED
