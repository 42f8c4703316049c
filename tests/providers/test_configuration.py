"""Constructor arguments: mistakes are refused at once, clearly."""

from __future__ import annotations

import pydantic
import pytest

from turnlog.domain.errors import UsageError
from turnlog.providers import (
    OpenAIChatCompletionsProvider,
    OpenAIResponsesProvider,
    RetryPolicy,
    Timeouts,
)


def test_defaults_point_at_openai() -> None:
    provider = OpenAIResponsesProvider("gpt-5")
    assert provider.base_url == "https://api.openai.com/v1"
    assert provider.timeouts == Timeouts()
    assert provider.retry == RetryPolicy()


def test_a_trailing_slash_in_the_base_url_is_ignored() -> None:
    provider = OpenAIChatCompletionsProvider("m", base_url="http://127.0.0.1:8000/v1/")
    assert provider.base_url == "http://127.0.0.1:8000/v1"


@pytest.mark.parametrize("base_url", ["127.0.0.1:8000", "ftp://host/v1", "http://"])
def test_a_base_url_that_is_not_http_is_refused(base_url: str) -> None:
    with pytest.raises(UsageError, match="base_url"):
        OpenAIResponsesProvider("m", base_url=base_url)


def test_an_empty_model_name_is_refused() -> None:
    with pytest.raises(UsageError, match="model"):
        OpenAIChatCompletionsProvider("")


@pytest.mark.parametrize(
    ("kind", "option"),
    [
        (OpenAIResponsesProvider, "input"),
        (OpenAIResponsesProvider, "stream"),
        (OpenAIChatCompletionsProvider, "messages"),
        (OpenAIChatCompletionsProvider, "stream_options"),
    ],
)
def test_options_may_not_replace_what_the_provider_fills(
    kind: type, option: str
) -> None:
    with pytest.raises(UsageError, match=option):
        kind("m", options={option: None})


def test_an_unknown_developer_role_is_refused() -> None:
    with pytest.raises(UsageError, match="developer_role"):
        OpenAIChatCompletionsProvider("m", developer_role="tool")  # type: ignore[arg-type]


def test_retry_and_timeout_settings_are_validated() -> None:
    with pytest.raises(pydantic.ValidationError):
        RetryPolicy(max_attempts=0)
    with pytest.raises(pydantic.ValidationError):
        Timeouts(read=0)
    with pytest.raises(pydantic.ValidationError):
        RetryPolicy(jitter=2)
