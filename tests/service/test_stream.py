"""The SSE stream: ids are log positions, Last-Event-ID resumes exactly,
deltas are live only, heartbeats flow, a slow client holds nothing up."""

from __future__ import annotations

import contextlib
import json
import threading

import httpx
from service_support import TOKEN_A, TOKENS, ServerThread, SSEReader, await_event

from turnlog import Runtime
from turnlog.domain.translation import EventTranslator
from turnlog.service import create_app
from turnlog.service.feed import read_entries

HEADERS_A = {"Authorization": f"Bearer {TOKEN_A}"}


def log_ids(runtime, session_id: str) -> list[str]:
    """Every durable event id of the session, from the log, in order."""
    entries = read_entries(runtime.transcript, session_id, EventTranslator(session_id))
    return [entry.event_id for entry in entries]


def read_until(reader: SSEReader, kind: str, limit: int = 500) -> list:
    events = []
    for _ in range(limit):
        event = reader.next()
        events.append(event)
        if json.loads(event.data)["msg"]["type"] == kind:
            return events
    raise AssertionError(f"no {kind} in {limit} events")


def run_to_approval(client: httpx.Client) -> tuple[str, str]:
    """A new session whose prompt waits for an approval; (session, request)."""
    session_id = client.post("/sessions", json={}).json()["session_id"]
    assert (
        client.post(f"/sessions/{session_id}/prompts", json={"text": "go"}).status_code
        == 202
    )
    request, _ = await_event(client, session_id, "approval_request")
    return session_id, request["request_id"]


def test_resuming_with_last_event_id_gives_the_rest_with_no_gap_or_duplicate(
    serve,
) -> None:
    served = serve()
    with served.client() as client:
        session_id, request_id = run_to_approval(client)
        with client.stream("GET", f"/sessions/{session_id}/events") as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            first = read_until(SSEReader(response), "tool_call_begin")
        last_id = first[-1].id
        client.post(
            f"/sessions/{session_id}/approvals/{request_id}", json={"decision": "allow"}
        )
        headers = {"Last-Event-ID": last_id}
        with client.stream(
            "GET", f"/sessions/{session_id}/events", headers=headers
        ) as response:
            rest = read_until(SSEReader(response), "turn_complete")
    durable = [e.id for e in first + rest if e.id is not None]
    assert len(durable) == len(set(durable))
    assert durable == log_ids(served.runtime, session_id)


def test_a_resume_between_messages_of_one_log_entry_is_exact(serve) -> None:
    served = serve()
    with served.client() as client:
        session_id, request_id = run_to_approval(client)
        client.post(
            f"/sessions/{session_id}/approvals/{request_id}", json={"decision": "allow"}
        )
        await_event(client, session_id, "turn_complete")
    ids = log_ids(served.runtime, session_id)
    # The answering step yields agent_message and model_step_completed at one
    # position: resuming after the first gets the second, and not the first.
    second = next(i for i in ids if ":" in i)
    position = second.split(":")[0]
    with (
        served.client() as client,
        client.stream(
            "GET", f"/sessions/{session_id}/events", params={"last_event_id": position}
        ) as response,
    ):
        after = read_until(SSEReader(response), "turn_complete")
    assert [e.id for e in after] == ids[ids.index(position) + 1 :]
    assert after[0].id == second


def test_deltas_are_sent_live_without_an_id(serve) -> None:
    served = serve()
    with served.client() as client:
        session_id, request_id = run_to_approval(client)
        with client.stream("GET", f"/sessions/{session_id}/events") as response:
            reader = SSEReader(response)
            read_until(reader, "approval_request")
            client.post(
                f"/sessions/{session_id}/approvals/{request_id}",
                json={"decision": "allow"},
            )
            rest = read_until(reader, "turn_complete")
    deltas = [
        e for e in rest if json.loads(e.data)["msg"]["type"] == "agent_message_delta"
    ]
    assert "".join(json.loads(e.data)["msg"]["delta"] for e in deltas) == (
        "All done: counted and published."
    )
    assert all(e.id is None for e in deltas)
    assert [e.id for e in rest if e.id] == [
        i for i in log_ids(served.runtime, session_id) if i in {e.id for e in rest}
    ]


def test_an_idle_stream_gets_heartbeats(serve) -> None:
    served = serve(heartbeat=0.05)
    with served.client() as client:
        session_id = client.post("/sessions", json={}).json()["session_id"]
        with client.stream("GET", f"/sessions/{session_id}/events") as response:
            reader = SSEReader(response)
            reader.next()  # session_configured
            # The next thing on an idle stream is a heartbeat comment; reading
            # for an event blocks on it, so read on a thread until one shows.
            thread = threading.Thread(target=lambda: _swallow(reader), daemon=True)
            thread.start()
            assert reader.comment_read.wait(10)
    assert reader.comments[0].startswith("ping")


def _swallow(reader: SSEReader) -> None:
    with contextlib.suppress(EOFError, httpx.HTTPError):
        reader.next()


def test_a_client_that_does_not_read_holds_up_neither_the_run_nor_others(serve) -> None:
    served = serve()
    with served.client() as client, served.client() as slow_client:
        session_id = client.post("/sessions", json={}).json()["session_id"]
        # The slow client opens the stream and reads nothing while runs go on.
        with slow_client.stream("GET", f"/sessions/{session_id}/events") as slow:
            after = None
            for turn in range(3):
                started = client.post(
                    f"/sessions/{session_id}/prompts", json={"text": f"turn {turn}"}
                ).json()
                assert started["status"] == "running"
                request, after = await_event(
                    client, session_id, "approval_request", after=after
                )
                client.post(
                    f"/sessions/{session_id}/approvals/{request['request_id']}",
                    json={"decision": "allow"},
                )
                _, after = await_event(client, session_id, "turn_complete", after=after)
            # Another client meanwhile reads the whole stream at once.
            with client.stream("GET", f"/sessions/{session_id}/events") as fast:
                reader = SSEReader(fast)
                fast_ids = []
                expected = log_ids(served.runtime, session_id)
                while len(fast_ids) < len(expected):
                    event = reader.next()
                    if event.id:
                        fast_ids.append(event.id)
            assert fast_ids == expected
            # The slow client, reading at last, gets everything, in order.
            slow_reader = SSEReader(slow)
            slow_ids = []
            while len(slow_ids) < len(expected):
                event = slow_reader.next()
                if event.id:
                    slow_ids.append(event.id)
            assert slow_ids == expected


def test_a_stream_behind_the_feed_buffer_reads_the_gap_from_the_log(serve) -> None:
    served = serve()
    served.app.state.turnlog.feeds.buffer = 4  # it keeps only the newest 4 to 8
    with served.client() as client:
        session_id, request_id = run_to_approval(client)
        client.post(
            f"/sessions/{session_id}/approvals/{request_id}", json={"decision": "allow"}
        )
        await_event(client, session_id, "turn_complete")
        expected = log_ids(served.runtime, session_id)
        # A first stream makes the feed; a second one from the start is behind it.
        with (
            client.stream("GET", f"/sessions/{session_id}/events") as first,
            client.stream("GET", f"/sessions/{session_id}/events") as second,
        ):
            # Each reader is kept: a reader dropped closes its lines'
            # generator, and with it the response, so the server would end
            # the first stream (and its feed, if the second one had not
            # joined it yet) before the assertion below looks at the feed.
            first_reader, second_reader = SSEReader(first), SSEReader(second)
            ids = [e.id for e in read_until(first_reader, "turn_complete")]
            assert served.app.state.turnlog.feeds._feeds[session_id].floor > (0, 0)
            later = [e.id for e in read_until(second_reader, "turn_complete")]
    assert ids == later == expected


def deltas_of(events: list) -> str:
    return "".join(
        json.loads(e.data)["msg"]["delta"]
        for e in events
        if json.loads(e.data)["msg"]["type"] == "agent_message_delta"
    )


@contextlib.contextmanager
def watched_approval(serve):
    """A session waiting for an approval, watched by one stream that has
    read the request: (client, pumps, session, request, reader, pump).

    The pump of the stream that saw the request first (``run_to_approval``
    reads it from a stream of its own) has ended before this one opens.
    """
    served = serve()
    pumps = served.app.state.turnlog.pumps
    with served.client() as client:
        session_id, request_id = run_to_approval(client)
        earlier = pumps.running(session_id)
        if earlier is not None:
            earlier.done.result(10)
        assert pumps.running(session_id) is None  # a run nobody watches: no pump
        with client.stream("GET", f"/sessions/{session_id}/events") as response:
            reader = SSEReader(response)  # held: a dropped reader ends the stream
            read_until(reader, "approval_request")
            pump = pumps.running(session_id)
            assert pump is not None
            yield client, pumps, session_id, request_id, reader, pump


def test_deltas_are_pumped_only_while_a_stream_reads_them(serve) -> None:
    with watched_approval(serve) as (
        client,
        pumps,
        session_id,
        request_id,
        reader,
        pump,
    ):
        # The pump is a task on the service's loop: no thread of its own
        # (it was one a watched session, named for it).
        assert not [t for t in threading.enumerate() if session_id in t.name]
        client.post(
            f"/sessions/{session_id}/approvals/{request_id}",
            json={"decision": "allow"},
        )
        rest = read_until(reader, "turn_complete")
    assert deltas_of(rest) == "All done: counted and published."
    pump.done.result(10)  # the stream closed: its pump ends
    assert pumps.running(session_id) is None


def test_closing_the_pumps_ends_each_pumps_task(serve) -> None:
    with watched_approval(serve) as (_, pumps, session_id, _, _, pump):
        pumps.close()  # as the service's shutdown does
        pump.done.result(10)  # its task ended, on the loop, with no error
        assert pumps.running(session_id) is None
        assert len(pumps) == 0


def test_a_stream_gets_the_deltas_of_a_session_opened_after_it(sqlite_url) -> None:
    from service_agents import approval_agent

    agents = {"publisher": approval_agent}
    # One server creates the session and stops: the next one has not opened
    # it when the stream starts, and opens it for the prompt.
    with Runtime.open(sqlite_url) as runtime:
        app = create_app(runtime, agents, TOKENS)
        with (
            ServerThread(app) as server,
            httpx.Client(
                base_url=f"http://127.0.0.1:{server.port}", headers=HEADERS_A
            ) as client,
        ):
            session_id = client.post("/sessions", json={}).json()["session_id"]
    with Runtime.open(sqlite_url) as runtime:
        app = create_app(runtime, agents, TOKENS)
        with (
            ServerThread(app) as server,
            httpx.Client(
                base_url=f"http://127.0.0.1:{server.port}",
                headers=HEADERS_A,
                timeout=20,
            ) as client,
            client.stream("GET", f"/sessions/{session_id}/events") as response,
        ):
            reader = SSEReader(response)
            reader.next()  # session_configured
            assert app.state.turnlog.live(session_id) is None
            assert app.state.turnlog.pumps.running(session_id) is None
            client.post(f"/sessions/{session_id}/prompts", json={"text": "go"})
            read_until(reader, "approval_request")
            request_id = client.get(f"/sessions/{session_id}/approvals").json()[
                "approvals"
            ][0]["request_id"]
            client.post(
                f"/sessions/{session_id}/approvals/{request_id}",
                json={"decision": "allow"},
            )
            rest = read_until(reader, "turn_complete")
        assert deltas_of(rest) == "All done: counted and published."
