"""The HTTP side shared by the providers: one client, timeouts, retries, errors.

An :class:`HttpEndpoint` owns one ``httpx.AsyncClient`` (HTTP/1.1 with
keep-alive, so successive model calls reuse a connection), created on the
event loop that first calls it. Each attempt runs under a total timeout;
failed attempts are retried as the :class:`RetryPolicy` says, honouring
``Retry-After``, and each failure becomes a ProviderError subclass that
carries the status and the server's own message. The API key lives only
in the client's ``Authorization`` header: it is redacted from every
message and never logged.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import logging
import random
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

import httpx
import msgspec

from turnlog.domain.errors import ProviderError, UsageError
from turnlog.domain.streaming import DeltaSink, discard_deltas
from turnlog.providers.errors import (
    MalformedStreamError,
    ProviderConnectionError,
    ProviderHTTPError,
    ProviderTimeoutError,
    StreamCutError,
)
from turnlog.providers.settings import RetryPolicy, Timeouts
from turnlog.providers.status import status_error

T = TypeVar("T")

try:
    USER_AGENT = f"turnlog/{importlib.metadata.version('turnlog')}"
except importlib.metadata.PackageNotFoundError:  # running from a source tree
    USER_AGENT = "turnlog"

LOGGER = logging.getLogger("turnlog.providers")

DEFAULT_BASE_URL = "https://api.openai.com/v1"
REDACTED = "[redacted]"
MIN_REDACTED_KEY_CHARS = 6
"""Shorter keys are not searched for: they would mangle ordinary words."""
TRACKED_TURNS = 512
"""Turns whose retry sleep is remembered; older ones are forgotten first."""


class Secret:
    """A value that never shows itself in a repr, a str or a traceback's locals."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        """The value itself, for the one place that sends it."""
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__

    def __reduce__(self) -> Any:
        msg = "a Secret is not pickled"
        raise TypeError(msg)


class Attempt:
    """What one attempt has done so far (it decides whether a retry is safe)."""

    __slots__ = ("emitted", "on_delta", "responded")

    def __init__(self, on_delta: DeltaSink) -> None:
        self.on_delta = on_delta
        self.responded = False
        self.emitted = False

    def emit(self, text: str) -> None:
        """Streams ``text`` to the subscribers; after this, never retry."""
        if text:
            self.emitted = True
            self.on_delta(text)


Reader = Callable[[httpx.Response, Attempt], Awaitable[T]]


class HttpEndpoint:
    """An OpenAI-style HTTP API: one client, retries, error mapping.

    Args:
        base_url: the API root, e.g. ``https://api.openai.com/v1``.
        api_key: sent as ``Authorization: Bearer ...``; None sends none
            (local servers often need no key).
        timeouts: connect / read / write / total timeouts.
        retry: the retry policy.
        headers: extra headers for every request.
        max_connections: connections kept to the server at most.
        transport: the httpx transport requests go through (default: the
            network); e.g. ``httpx.MockTransport`` in tests, or a transport
            with proxies or client certificates.
        api_key_header: the header the key goes in, as it is (Anthropic's
            ``x-api-key``); None sends ``Authorization: Bearer KEY``.
    """

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str | None,
        timeouts: Timeouts,
        retry: RetryPolicy,
        headers: Mapping[str, str] | None = None,
        max_connections: int = 100,
        transport: httpx.AsyncBaseTransport | None = None,
        api_key_header: str | None = None,
    ) -> None:
        url = httpx.URL(base_url.rstrip("/"))
        if url.scheme not in ("http", "https") or not url.host:
            msg = f"base_url must be an http(s) URL, got {base_url!r}"
            raise UsageError(msg)
        self.base_url = str(url)
        port = f":{url.port}" if url.port else ""
        # Shown in messages: without any user:password part of the URL.
        self.where = f"{url.scheme}://{url.host}{port}{url.path.rstrip('/')}"
        self.timeouts = timeouts
        self.retry = retry
        self._api_key = Secret(api_key) if api_key else None
        self._api_key_header = api_key_header
        self._headers = {
            "Accept": "text/event-stream, application/json",
            "Content-Type": "application/json",
            "User-Agent": USER_AGENT,
            **dict(headers or {}),
        }
        self._max_connections = max_connections
        self._transport = transport
        self._client: httpx.AsyncClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()
        self._slept: OrderedDict[tuple[str, str], float] = OrderedDict()

    # -- the client ------------------------------------------------------------

    def client(self) -> httpx.AsyncClient:
        """The client for the running loop (made on first use there)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            client = self._client
            if client is not None and self._loop is loop and not client.is_closed:
                return client
            if client is not None and not client.is_closed:
                _close_elsewhere(client, self._loop)
            timeout = httpx.Timeout(
                connect=self.timeouts.connect,
                read=self.timeouts.read,
                write=self.timeouts.write,
                pool=self.timeouts.connect,
            )
            limits = httpx.Limits(
                max_connections=self._max_connections,
                max_keepalive_connections=self._max_connections,
            )
            headers = dict(self._headers)
            if self._api_key is not None and self._api_key_header is not None:
                # Only here; turnlog never logs or shows the client's headers.
                headers[self._api_key_header] = self._api_key.reveal()
            elif self._api_key is not None:
                # Only here, and httpx masks it in any repr of the headers.
                headers["Authorization"] = f"Bearer {self._api_key.reveal()}"
            self._client = httpx.AsyncClient(
                headers=headers,
                timeout=timeout,
                limits=limits,
                transport=self._transport,
            )
            self._loop = loop
            return self._client

    async def aclose(self) -> None:
        """Closes the client (and its connections); a later call reopens one."""
        with self._lock:
            client, loop, self._client, self._loop = (
                self._client,
                self._loop,
                None,
                None,
            )
        if client is None or client.is_closed:
            return
        if loop is asyncio.get_running_loop():
            await client.aclose()
        elif loop is not None and loop.is_running():
            await asyncio.wrap_future(
                asyncio.run_coroutine_threadsafe(client.aclose(), loop)
            )

    def close(self) -> None:
        """Closes the client from a thread other than its loop's.

        For owners that run the provider on a loop in another thread (as
        the Runtime does): call it before that loop stops.
        """
        with self._lock:
            client, loop = self._client, self._loop
            if client is None or client.is_closed or loop is None:
                self._client = self._loop = None
                return
            try:
                running = asyncio.get_running_loop()
            except RuntimeError:
                running = None
            if running is loop:
                msg = "close() would block the client's own loop; await aclose()"
                raise UsageError(msg)
            self._client = self._loop = None
        if loop.is_running():
            asyncio.run_coroutine_threadsafe(client.aclose(), loop).result(timeout=10)
        elif not loop.is_closed():
            loop.run_until_complete(client.aclose())

    # -- requests --------------------------------------------------------------

    async def request(
        self,
        path: str,
        body: Any,
        *,
        turn: tuple[str, str],
        read: Reader[T],
        on_delta: DeltaSink = discard_deltas,
    ) -> T:
        """POSTs ``body`` as JSON to ``path``; ``read`` turns a 2xx answer into T.

        Retries as the policy says; raises a ProviderError subclass.
        ``turn`` (session id, turn id) keys the per-turn retry budget;
        streamed text goes to ``on_delta``.
        """
        content = msgspec.json.encode(body)
        attempts = self.retry.max_attempts
        number = 0
        while True:
            number += 1
            attempt = Attempt(on_delta)
            try:
                return await self._attempt(path, content, attempt, read)
            except ProviderError as error:
                delay = self._retry_delay(error, attempt, number, turn)
                if delay is None:
                    raise
                LOGGER.warning(
                    "model call to %s%s failed (%s: %s); retry %d of %d in %.2f s",
                    self.where,
                    path,
                    type(error).__name__,
                    error,
                    number,
                    attempts - 1,
                    delay,
                )
            await asyncio.sleep(delay)

    async def _attempt(
        self, path: str, content: bytes, attempt: Attempt, read: Reader[T]
    ) -> T:
        client = self.client()
        where = f"{self.where}{path}"
        try:
            async with asyncio.timeout(self.timeouts.total):
                async with client.stream(
                    "POST", f"{self.base_url}{path}", content=content
                ) as response:
                    attempt.responded = True
                    if response.status_code >= 400:
                        raise self.status_error(response, await response.aread(), path)
                    return await read(response, attempt)
        except TimeoutError:
            msg = (
                f"no complete answer from {where} within the total timeout "
                f"of {self.timeouts.total:g} s"
            )
            raise ProviderTimeoutError(msg) from None
        except httpx.ConnectTimeout:
            msg = f"could not connect to {where} within {self.timeouts.connect:g} s"
            raise ProviderConnectionError(msg) from None
        except httpx.ConnectError as error:
            msg = f"could not connect to {where}: {self.redact(str(error))}"
            raise ProviderConnectionError(msg) from None
        except httpx.TimeoutException as error:
            kind = type(error).__name__
            msg = f"{kind} from {where}: no data for {self.timeouts.read:g} s"
            raise ProviderTimeoutError(msg) from None
        except httpx.DecodingError as error:
            msg = f"the answer from {where} could not be decoded: {error}"
            raise MalformedStreamError(self.redact(msg)) from None
        except httpx.TransportError as error:
            detail = self.redact(str(error)) or type(error).__name__
            if attempt.responded:
                msg = f"the stream from {where} was cut: {detail}"
                raise StreamCutError(msg) from None
            msg = f"the connection to {where} dropped before an answer: {detail}"
            raise ProviderConnectionError(msg) from None
        except httpx.HTTPError as error:
            msg = f"request to {where} failed: {self.redact(str(error))}"
            raise ProviderError(msg) from None

    def _retry_delay(
        self, error: ProviderError, attempt: Attempt, number: int, turn: tuple[str, str]
    ) -> float | None:
        """Seconds to wait before the next attempt, or None to give up."""
        if attempt.emitted or not _retryable(error):
            return None
        policy = self.retry
        if number >= policy.max_attempts:
            _note(
                error,
                "not retried: one attempt allowed"
                if number == 1
                else f"gave up after {number} attempts",
            )
            return None
        retry_after = getattr(error, "retry_after", None)
        if isinstance(retry_after, float):
            delay = retry_after
        else:
            draw = random.random()  # noqa: S311 - jitter, not a secret
            delay = policy.backoff(number, draw)
        with self._lock:
            spent = self._slept.get(turn, 0.0)
            if spent + delay > policy.max_retry_sleep_per_turn:
                _note(
                    error,
                    f"not retried: waiting {delay:.1f} s more would exceed the "
                    f"turn's retry budget of {policy.max_retry_sleep_per_turn:g} s",
                )
                return None
            self._slept[turn] = spent + delay
            self._slept.move_to_end(turn)
            while len(self._slept) > TRACKED_TURNS:
                self._slept.popitem(last=False)
        return delay

    # -- errors ----------------------------------------------------------------

    def status_error(
        self, response: httpx.Response, body: bytes, path: str
    ) -> ProviderHTTPError:
        """The error for an HTTP error answer, with the server's message."""
        return status_error(response, body, f"{self.where}{path}", self.redact)

    def redact(self, text: str) -> str:
        """``text`` with the API key replaced, should a server echo it."""
        key = self._api_key.reveal() if self._api_key is not None else ""
        if len(key) >= MIN_REDACTED_KEY_CHARS and key in text:
            return text.replace(key, REDACTED)
        return text

    def __repr__(self) -> str:
        return f"HttpEndpoint({self.where!r})"


def _retryable(error: ProviderError) -> bool:
    if isinstance(error, ProviderHTTPError):
        return error.status in (408, 429) or error.status >= 500
    return isinstance(error, ProviderConnectionError | StreamCutError)


def _note(error: ProviderError, note: str) -> None:
    """Adds ``note`` to the message of ``error`` (args[0], which str shows)."""
    error.args = (f"{error.args[0]} ({note})", *error.args[1:])


def _close_elsewhere(
    client: httpx.AsyncClient, loop: asyncio.AbstractEventLoop | None
) -> None:
    """Closes a client made on another loop, if that loop still runs."""
    if loop is not None and loop.is_running():
        asyncio.run_coroutine_threadsafe(client.aclose(), loop)
