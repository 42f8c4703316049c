"""HTTP errors, retries, Retry-After, the retry budget, and the API key
staying in the Authorization header and nowhere else."""

from __future__ import annotations

import logging
import pickle
import socket
import time
from email.utils import formatdate
from typing import Any

import httpx
import pytest
from fake_openai import Fail, FakeOpenAI, Reply
from provider_support import (
    API_KEY,
    key_header,
    make_provider,
    model_request,
    respond,
)

from turnlog.domain.errors import ProviderError
from turnlog.providers import (
    AuthenticationError,
    BadRequestError,
    ProviderConnectionError,
    ProviderHTTPError,
    RateLimitError,
    ResponseFailedError,
    RetryPolicy,
    ServerError,
    StreamCutError,
)
from turnlog.providers.status import parse_retry_after, server_error_message


def test_a_400_is_a_bad_request_error_with_the_servers_message(
    fake: FakeOpenAI, provider: Any, run: Any
) -> None:
    fake.script(Fail(400, "Invalid value for 'input'.", code="invalid_value"))
    with pytest.raises(BadRequestError) as caught:
        run(respond(provider, model_request()))
    error = caught.value
    assert error.status == 400
    assert error.server_message == "Invalid value for 'input'."
    assert "HTTP 400" in str(error)
    assert "Invalid value for 'input'." in str(error)
    assert error.request_id is not None
    assert error.request_id in str(error)
    assert len(fake.requests) == 1  # a refused request is not sent again


@pytest.mark.parametrize("status", [401, 403])
def test_refused_credentials_are_an_authentication_error_and_not_retried(
    fake: FakeOpenAI, provider: Any, run: Any, status: int
) -> None:
    fake.script(Fail(status, "Incorrect API key provided."), Reply(text="never"))
    with pytest.raises(
        AuthenticationError, match="Incorrect API key provided"
    ) as caught:
        run(respond(provider, model_request()))
    assert caught.value.status == status
    assert len(fake.requests) == 1


def test_a_429_is_retried_after_the_advertised_retry_after(
    fake: FakeOpenAI, provider: Any, run: Any
) -> None:
    fake.script(
        Fail(
            429, "Rate limit reached.", headers=(("Retry-After", "1"),), type="requests"
        ),
        Reply(text="finally"),
    )
    response, _ = run(respond(provider, model_request()))
    assert response.output[0]["content"] == "finally"
    first, second = fake.requests
    assert second.at - first.at >= 1.0


def test_retry_after_ms_is_honoured_to_the_millisecond(
    fake: FakeOpenAI, provider: Any, run: Any
) -> None:
    fake.script(
        Fail(
            429, "slow down", headers=(("retry-after-ms", "250"), ("Retry-After", "9"))
        ),
        Reply(text="ok"),
    )
    run(respond(provider, model_request()))
    first, second = fake.requests
    assert 0.25 <= second.at - first.at < 5


def test_5xx_answers_are_retried_with_backoff(
    fake: FakeOpenAI, provider: Any, run: Any
) -> None:
    fake.script(
        Fail(500, "boom", type="server_error"), Fail(503, "busy"), Reply(text="up")
    )
    response, _ = run(respond(provider, model_request()))
    assert response.output[0]["content"] == "up"
    assert len(fake.requests) == 3


def test_a_server_that_keeps_failing_gives_up_after_max_attempts(
    fake: FakeOpenAI, provider: Any, run: Any
) -> None:
    fake.script(*[Fail(500, "The server had an error.", type="server_error")] * 3)
    with pytest.raises(ServerError, match="gave up after 3 attempts") as caught:
        run(respond(provider, model_request()))
    assert caught.value.status == 500
    assert "The server had an error." in str(caught.value)
    assert len(fake.requests) == 3


def test_with_one_attempt_allowed_a_failure_says_it_was_not_retried(
    fake: FakeOpenAI, dialect: str, run: Any
) -> None:
    provider = make_provider(dialect, fake.base_url, retry=RetryPolicy(max_attempts=1))
    fake.script(Fail(500, "The server had an error.", type="server_error"))
    try:
        with pytest.raises(ServerError) as caught:
            run(respond(provider, model_request()))
    finally:
        run(provider.aclose())
    assert str(caught.value).endswith("(not retried: one attempt allowed)")
    assert "attempts" not in str(caught.value)  # never "after 1 attempts"
    assert len(fake.requests) == 1


def test_a_retry_after_beyond_the_turns_budget_fails_at_once(
    fake: FakeOpenAI, provider: Any, run: Any
) -> None:
    fake.script(
        Fail(429, "quota", headers=(("Retry-After", "120"),)), Reply(text="never")
    )
    started = time.monotonic()
    with pytest.raises(RateLimitError, match="retry budget") as caught:
        run(respond(provider, model_request()))
    assert time.monotonic() - started < 2
    assert caught.value.retry_after == 120.0
    assert len(fake.requests) == 1


def test_the_retry_budget_is_shared_by_the_calls_of_one_turn(
    fake: FakeOpenAI, dialect: str, run: Any
) -> None:
    policy = RetryPolicy(max_attempts=5, max_retry_sleep_per_turn=0.5)
    provider = make_provider(dialect, fake.base_url, retry=policy)
    slow = Fail(429, "wait", headers=(("retry-after-ms", "300"),))
    fake.script(slow, Reply(text="one"), slow)
    try:
        run(respond(provider, model_request(turn_id="t1")))
        with pytest.raises(RateLimitError, match="retry budget"):
            run(respond(provider, model_request(turn_id="t1")))
        fake.script(slow, Reply(text="another turn, another budget"))
        response, _ = run(respond(provider, model_request(turn_id="t2")))
    finally:
        run(provider.aclose())
    assert response.output[0]["content"] == "another turn, another budget"


def test_a_refused_connection_is_retried_then_a_connection_error(
    dialect: str, run: Any
) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    provider = make_provider(dialect, f"http://127.0.0.1:{port}/v1")
    try:
        with pytest.raises(ProviderConnectionError, match="gave up after 3 attempts"):
            run(respond(provider, model_request()))
    finally:
        run(provider.aclose())


def test_the_api_key_is_in_the_authorization_header_only(
    fake: FakeOpenAI,
    provider: Any,
    run: Any,
    caplog: pytest.LogCaptureFixture,
    dialect: str,
) -> None:
    """A server that echoes the key, failures, retries, debug logging: the
    key is in the header and in no message, log record or repr."""
    echo = f"Incorrect API key provided: {API_KEY}. You can find your key at ..."
    fake.script(
        Fail(500, f"internal error for key {API_KEY}"),
        Fail(401, echo),
        Fail(500, "x", body=f'{{"error": {{"message": "{API_KEY}"}}}}'.encode()),
        Fail(500, "x"),
        Fail(500, "x"),
        Reply(text="in stream", error_after=1, error_message=f"bad key {API_KEY}"),
    )
    caplog.set_level(logging.DEBUG)
    errors: list[BaseException] = []
    for _ in range(3):
        with pytest.raises(ProviderError) as caught:
            run(respond(provider, model_request()))
        errors.append(caught.value)
    assert [type(e) for e in errors] == [
        AuthenticationError,
        ServerError,
        ResponseFailedError,
    ]
    header, value = key_header(dialect)
    assert all(r.headers[header] == value for r in fake.requests)
    assert all(API_KEY not in str(r.body) for r in fake.requests)
    for error in errors:
        assert API_KEY not in str(error)
        assert API_KEY not in repr(error)
        assert all(API_KEY not in str(arg) for arg in error.args)
        assert API_KEY not in str(pickle.loads(pickle.dumps(error)))
    assert "[redacted]" in str(errors[0])
    assert caplog.records  # the retries were logged (and httpx logged at DEBUG)
    for record in caplog.records:
        assert API_KEY not in record.getMessage()
    assert API_KEY not in repr(provider)
    assert API_KEY not in str(vars(provider))
    assert API_KEY not in str(vars(provider._endpoint))


def test_no_authorization_header_without_a_key(
    fake: FakeOpenAI, dialect: str, run: Any
) -> None:
    provider = make_provider(dialect, fake.base_url, api_key=None)
    fake.script(Reply(text="local"))
    try:
        run(respond(provider, model_request()))
    finally:
        run(provider.aclose())
    assert "authorization" not in fake.requests[0].headers
    assert "x-api-key" not in fake.requests[0].headers


def test_extra_headers_are_sent(fake: FakeOpenAI, dialect: str, run: Any) -> None:
    provider = make_provider(
        dialect, fake.base_url, headers={"OpenAI-Organization": "org-1", "X-Trace": "t"}
    )
    fake.script(Reply(text="hi"))
    try:
        run(respond(provider, model_request()))
    finally:
        run(provider.aclose())
    headers = fake.requests[0].headers
    assert headers["openai-organization"] == "org-1"
    assert headers["x-trace"] == "t"


def test_errors_pickle_with_their_details() -> None:
    errors = [
        RateLimitError("HTTP 429: slow", 429, "slow", 1.5, "req_1"),
        ResponseFailedError("failed", "server_error"),
        StreamCutError("cut"),
    ]
    for error in errors:
        copy = pickle.loads(pickle.dumps(error))
        assert type(copy) is type(error)
        assert str(copy) == str(error)
        assert copy.args == error.args
    copy = pickle.loads(pickle.dumps(errors[0]))
    assert isinstance(copy, ProviderHTTPError)
    assert (copy.status, copy.server_message, copy.retry_after, copy.request_id) == (
        429,
        "slow",
        1.5,
        "req_1",
    )


def test_retry_after_parses_seconds_milliseconds_and_http_dates() -> None:
    now = 1_700_000_000.0
    assert parse_retry_after(httpx.Headers({"Retry-After": "3"}), now) == 3.0
    assert parse_retry_after(httpx.Headers({"retry-after-ms": "1500"}), now) == 1.5
    date = formatdate(now + 30, usegmt=True)
    assert parse_retry_after(httpx.Headers({"Retry-After": date}), now) == 30.0
    past = formatdate(now - 30, usegmt=True)
    assert parse_retry_after(httpx.Headers({"Retry-After": past}), now) == 0.0
    assert parse_retry_after(httpx.Headers({"Retry-After": "soon"}), now) is None
    assert parse_retry_after(httpx.Headers({}), now) is None


def test_error_messages_are_found_in_the_shapes_servers_use() -> None:
    assert server_error_message(b'{"error": {"message": "openai"}}') == "openai"
    assert server_error_message(b'{"error": "ollama"}') == "ollama"
    assert server_error_message(b'{"object": "error", "message": "vllm"}') == "vllm"
    assert (
        server_error_message(b"<html>502 Bad Gateway</html>")
        == "<html>502 Bad Gateway</html>"
    )
    assert server_error_message(b"") is None
    assert len(server_error_message(b"x" * 5000) or "") == 500


def test_backoff_grows_and_stays_within_its_bounds() -> None:
    policy = RetryPolicy(
        initial_backoff=1.0, multiplier=2.0, max_backoff=5.0, jitter=0.5
    )
    assert policy.backoff(1, 0.5) == 1.0
    assert policy.backoff(2, 0.5) == 2.0
    assert policy.backoff(10, 0.5) == 5.0
    assert policy.backoff(1, 0.0) == 0.5
    assert policy.backoff(1, 0.999) < 1.5
