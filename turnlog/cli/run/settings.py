"""Where the model lives: settings from the environment and ``turnlog.toml``.

The environment names one model (the route ``default``)::

    TURNLOG_MODEL     the model name; without it (or routes) nothing is configured
    OPENAI_API_KEY    its API key (local servers usually need none)
    OPENAI_BASE_URL   the API root (default https://api.openai.com/v1)
    TURNLOG_API       responses (default), chat (/chat/completions) or
                      anthropic (Anthropic's /v1/messages)
    ANTHROPIC_API_KEY    the key of the anthropic API
    ANTHROPIC_BASE_URL   its API root (default https://api.anthropic.com)
    TURNLOG_STORE     the log (as ``--store``)
    TURNLOG_CONFIG    the route file (as ``turnlog run --config``)

The route file names more, each its own endpoint::

    default_route = "fast"

    [routes.fast]
    model = "llama3.1"
    base_url = "http://127.0.0.1:8080/v1"
    api = "chat"
    api_key_env = "LOCAL_KEY"   # the variable holding the key, never the key

A route without ``api`` takes ``TURNLOG_API``; one without ``base_url``
takes ``OPENAI_BASE_URL`` (``ANTHROPIC_BASE_URL`` for the anthropic API);
one without ``api_key_env`` takes ``OPENAI_API_KEY`` (``ANTHROPIC_API_KEY``). The
environment wins over the file: ``TURNLOG_MODEL`` replaces a
``[routes.default]``. API keys live only in the environment and in
``SecretStr`` values: no message, ``repr`` or file of turnlog holds one.

Trust: ``base_url`` and ``api_key_env`` decide where a key is sent, so only
a file the user chose may set them: the one ``--config`` or
``TURNLOG_CONFIG`` names (then it is the only file read), or the user's
own ``$XDG_CONFIG_HOME/turnlog/turnlog.toml`` (default
``~/.config/turnlog/``). A ``turnlog.toml`` merely found in the working
directory (a cloned repository's, say) is read on top of the user's file,
but may only pick models, APIs and the default route; one that sets either
key, or declares ``[mcp_servers]`` (commands turnlog would run, see
``turnlog.cli.run.mcp_settings``), is refused, naming the key and how to
trust the file.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import httpx
import pydantic
import pydantic_settings

from turnlog.agent_parts.checks import DEFAULT_ROUTE
from turnlog.cli.run.mcp_settings import McpServerConfig, ServerName
from turnlog.cli.run.trust import refuse_untrusted
from turnlog.domain.errors import InvalidInputError, UsageError
from turnlog.providers import (
    AnthropicMessagesProvider,
    HttpModelProvider,
    OpenAIChatCompletionsProvider,
    OpenAIResponsesProvider,
)
from turnlog.routing import ModelRouter

Api = Literal["responses", "chat", "anthropic"]

CONFIG_FILE = "turnlog.toml"
"""The route file's name, in the user's config directory and the working one."""

DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_API_KEY_ENV = "OPENAI_API_KEY"
ANTHROPIC_BASE_URL = "https://api.anthropic.com"
ANTHROPIC_API_KEY_ENV = "ANTHROPIC_API_KEY"
KEYED_HOSTS = frozenset({"api.openai.com", "api.anthropic.com"})
"""Hosts that refuse every request without a key: a missing one is named early."""

NOT_CONFIGURED = (
    "no model configured: set TURNLOG_MODEL (and OPENAI_API_KEY, or "
    "TURNLOG_API=anthropic and ANTHROPIC_API_KEY) or add [routes] "
    f"to {CONFIG_FILE}; try `turnlog demo` for an offline session"
)


class NoModelConfiguredError(UsageError):
    """Neither the environment nor the route file names a model."""


class EnvironmentSettings(pydantic_settings.BaseSettings):
    """The settings read from environment variables (names as documented above).

    Empty variables count as unset. Only the environment is read: no
    ``.env`` file, no secrets directory.
    """

    model_config = pydantic_settings.SettingsConfigDict(
        frozen=True, extra="ignore", env_ignore_empty=True
    )

    store: str | None = pydantic.Field(default=None, validation_alias="TURNLOG_STORE")
    model: str | None = pydantic.Field(default=None, validation_alias="TURNLOG_MODEL")
    api_key: pydantic.SecretStr | None = pydantic.Field(
        default=None, validation_alias="OPENAI_API_KEY"
    )
    base_url: str = pydantic.Field(
        default=DEFAULT_BASE_URL, validation_alias="OPENAI_BASE_URL"
    )
    anthropic_api_key: pydantic.SecretStr | None = pydantic.Field(
        default=None, validation_alias="ANTHROPIC_API_KEY"
    )
    anthropic_base_url: str = pydantic.Field(
        default=ANTHROPIC_BASE_URL, validation_alias="ANTHROPIC_BASE_URL"
    )
    api: Api = pydantic.Field(default="responses", validation_alias="TURNLOG_API")
    config: Path | None = pydantic.Field(
        default=None, validation_alias="TURNLOG_CONFIG"
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[pydantic_settings.BaseSettings],
        init_settings: pydantic_settings.PydanticBaseSettingsSource,
        env_settings: pydantic_settings.PydanticBaseSettingsSource,
        dotenv_settings: pydantic_settings.PydanticBaseSettingsSource,
        file_secret_settings: pydantic_settings.PydanticBaseSettingsSource,
    ) -> tuple[pydantic_settings.PydanticBaseSettingsSource, ...]:
        """Arguments, then the environment; nothing else is read."""
        return init_settings, env_settings


class RouteConfig(pydantic.BaseModel, frozen=True, extra="forbid"):
    """One ``[routes.NAME]`` table of the route file.

    Attributes:
        model: the model name the endpoint knows.
        base_url: the API root (default: ``OPENAI_BASE_URL``).
        api: ``responses``, ``chat`` or ``anthropic`` (default: ``TURNLOG_API``).
        api_key_env: the environment variable holding the key (default:
            ``OPENAI_API_KEY``); the key itself never goes in the file.
    """

    model: str = pydantic.Field(min_length=1)
    base_url: str | None = None
    api: Api | None = None
    api_key_env: str | None = pydantic.Field(default=None, min_length=1)


class ConfigFile(pydantic.BaseModel, frozen=True, extra="forbid"):
    """The route file: named routes, the one new sessions start on, MCP servers."""

    default_route: str | None = None
    routes: dict[str, RouteConfig] = pydantic.Field(default_factory=dict)
    mcp_servers: dict[ServerName, McpServerConfig] = pydantic.Field(
        default_factory=dict
    )


class Route(pydantic.BaseModel, frozen=True):
    """A route with every default filled in: what a provider is built from."""

    name: str
    model: str
    base_url: str
    api: Api
    api_key: pydantic.SecretStr | None
    api_key_env: str

    def describe(self) -> str:
        """``NAME (MODEL at URL, API)``: the route without its key."""
        return f"{self.name} ({self.model} at {self.base_url}, {self.api} API)"


class Settings(pydantic.BaseModel, frozen=True):
    """Everything ``turnlog run`` needs to know, from :func:`load_settings`.

    Attributes:
        environment: what the environment variables say.
        file: what the route files say, merged (empty if there is none).
        config_path: the trusted route file read, if one was.
        project_path: the working directory's ``turnlog.toml``, if read.
    """

    environment: EnvironmentSettings
    file: ConfigFile = ConfigFile()
    config_path: Path | None = None
    project_path: Path | None = None

    @property
    def store(self) -> str | None:
        """The log's URL from ``TURNLOG_STORE``, if set."""
        return self.environment.store

    def routes(self) -> dict[str, Route]:
        """Every configured route by name, the file's order, ``default`` last.

        Raises UsageError naming the setting at fault (an ``api_key_env``
        that is not set, a keyless route to a host that needs a key).
        """
        env = self.environment
        routes: dict[str, Route] = {}
        for name, config in self.file.routes.items():
            if name == DEFAULT_ROUTE and env.model is not None:
                continue  # TURNLOG_MODEL replaces it: the environment wins
            api = config.api or env.api
            key_env = config.api_key_env or _key_env(api)
            if config.api_key_env is None:
                key = _env_key(env, api)
            else:
                # Only a trusted file may name api_key_env: it came from there.
                key = _secret_from(config.api_key_env, name, str(self.config_path))
            routes[name] = _checked(
                Route(
                    name=name,
                    model=config.model,
                    base_url=config.base_url or _env_base_url(env, api),
                    api=api,
                    api_key=key,
                    api_key_env=key_env,
                )
            )
        if env.model is not None:
            routes[DEFAULT_ROUTE] = _checked(
                Route(
                    name=DEFAULT_ROUTE,
                    model=env.model,
                    base_url=_env_base_url(env, env.api),
                    api=env.api,
                    api_key=_env_key(env, env.api),
                    api_key_env=_key_env(env.api),
                )
            )
        return routes

    def default_route(self, routes: Mapping[str, Route]) -> str:
        """The route new sessions start on.

        ``default_route`` from the file if given, else ``default`` (the
        one ``TURNLOG_MODEL`` makes), else the file's first route.
        """
        if not routes:
            raise NoModelConfiguredError(NOT_CONFIGURED)
        chosen = self.file.default_route
        if chosen is not None:
            if chosen not in routes:
                msg = (
                    f"{self._where()}: default_route {chosen!r} is not a route; "
                    f"configured routes: {', '.join(routes)}"
                )
                raise UsageError(msg)
            return chosen
        if DEFAULT_ROUTE in routes:
            return DEFAULT_ROUTE
        return next(iter(routes))

    def _where(self) -> str:
        path = self.project_path or self.config_path
        return str(path) if path else CONFIG_FILE


def _key_env(api: Api) -> str:
    """The variable a route of ``api`` reads its key from, unless it names one."""
    return ANTHROPIC_API_KEY_ENV if api == "anthropic" else DEFAULT_API_KEY_ENV


def _env_key(env: EnvironmentSettings, api: Api) -> pydantic.SecretStr | None:
    return env.anthropic_api_key if api == "anthropic" else env.api_key


def _env_base_url(env: EnvironmentSettings, api: Api) -> str:
    return env.anthropic_base_url if api == "anthropic" else env.base_url


def _secret_from(variable: str, route: str, where: str) -> pydantic.SecretStr:
    value = os.environ.get(variable)
    if not value:
        msg = (
            f"route {route!r} in {where} reads its API key from ${variable}, "
            "which is not set"
        )
        raise UsageError(msg)
    return pydantic.SecretStr(value)


def _checked(route: Route) -> Route:
    """``route`` if it can work; a UsageError naming the setting otherwise."""
    try:
        url = httpx.URL(route.base_url)
    except httpx.InvalidURL:
        url = None
    if url is None or url.scheme not in ("http", "https") or not url.host:
        msg = (
            f"route {route.name!r}: base_url must be an http(s) URL, "
            f"not {route.base_url!r}"
        )
        raise UsageError(msg)
    if route.api_key is None and url.host in KEYED_HOSTS:
        msg = (
            f"route {route.name!r} ({url.host}) needs an API key: "
            f"set ${route.api_key_env}"
        )
        raise UsageError(msg)
    return route


def user_config_path() -> Path | None:
    """The user's own route file: ``$XDG_CONFIG_HOME/turnlog/turnlog.toml``.

    ``XDG_CONFIG_HOME`` counts only if absolute (as the XDG spec says);
    else ``~/.config``. None if there is no home directory to look in.
    """
    base = os.environ.get("XDG_CONFIG_HOME", "")
    if not os.path.isabs(base):
        try:
            base = str(Path.home() / ".config")
        except RuntimeError:  # no HOME and no passwd entry
            return None
    return Path(base) / "turnlog" / CONFIG_FILE


def load_settings(cwd: Path | None = None, config: Path | None = None) -> Settings:
    """Reads the environment and the route files.

    ``config`` (``turnlog run --config``), else ``TURNLOG_CONFIG``, names
    the one file read, trusted. Without either, the user's file
    (:func:`user_config_path`, trusted) and ``turnlog.toml`` in ``cwd``
    (default the working directory; untrusted) are read, if they exist,
    the second on top of the first.

    Raises InvalidInputError, in one line naming the setting and never its
    value, for anything malformed, for an explicitly named file that is not
    there, and for an untrusted file that sets a key of UNTRUSTED_KEYS.
    """
    try:
        environment = EnvironmentSettings()
    except pydantic.ValidationError as error:
        raise InvalidInputError(_problems("environment", error)) from None
    chosen, source = (config, "--config") if config else (environment.config, None)
    if chosen is not None:
        if not chosen.is_file():
            msg = f"{source or 'TURNLOG_CONFIG'} names {chosen}, which is not a file"
            raise InvalidInputError(msg)
        return Settings(
            environment=environment, file=read_config(chosen), config_path=chosen
        )
    user = user_config_path()
    trusted = user if user is not None and user.is_file() else None
    settings = Settings(
        environment=environment,
        file=read_config(trusted) if trusted else ConfigFile(),
        config_path=trusted,
    )
    project = (cwd or Path.cwd()) / CONFIG_FILE
    if not project.is_file() or (trusted is not None and project.samefile(trusted)):
        return settings
    found = read_config(project)
    refuse_untrusted(project, found, user)
    return settings.model_copy(
        update={
            "file": _merged(settings.file, found, project, environment.api),
            "project_path": project,
        }
    )


def _merged(
    trusted: ConfigFile, found: ConfigFile, path: Path, default_api: Api
) -> ConfigFile:
    """``found`` on top of ``trusted``: a route of the same name keeps the
    trusted endpoint and key and takes the model (and API) found.

    The API may not switch between OpenAI's and Anthropic's there: that
    would switch which key goes to the trusted endpoint.
    """
    routes = dict(trusted.routes)
    for name, route in found.routes.items():
        base = routes.get(name)
        if base is not None and route.api is not None:
            before = base.api or default_api
            if _key_env(route.api) != _key_env(before):
                msg = (
                    f"{path}: routes.{name}.api refused: a turnlog.toml found in "
                    f"the working directory may not switch a trusted route from "
                    f"the {before} API to the {route.api} API (its key would change)"
                )
                raise InvalidInputError(msg)
        routes[name] = (
            route
            if base is None
            else base.model_copy(
                update={"model": route.model, "api": route.api or base.api}
            )
        )
    return ConfigFile(
        default_route=found.default_route or trusted.default_route,
        routes=routes,
        mcp_servers=trusted.mcp_servers,  # a found file may declare none
    )


def read_config(path: Path) -> ConfigFile:
    """The route file at ``path``; InvalidInputError in one line if malformed."""
    try:
        with path.open("rb") as file:
            data: dict[str, Any] = tomllib.load(file)
    except tomllib.TOMLDecodeError as error:
        msg = f"{path} is not valid TOML: {error}"
        raise InvalidInputError(msg) from None
    except OSError as error:
        msg = f"cannot read {path}: {error.strerror or error}"
        raise InvalidInputError(msg) from None
    try:
        return ConfigFile.model_validate(data)
    except pydantic.ValidationError as error:
        raise InvalidInputError(_problems(str(path), error)) from None


def _problems(where: str, error: pydantic.ValidationError) -> str:
    """The validation problems on one line, without the values given.

    pydantic's own message quotes the input, which could be a key.
    """
    parts = []
    for problem in error.errors(include_input=False, include_url=False):
        # Environment problems are located by variable name (the alias).
        location = ".".join(str(part) for part in problem["loc"])
        if problem["type"] == "extra_forbidden":
            hint = " (API keys go in the environment: name one with api_key_env)"
            detail = "unknown setting" + (hint if "key" in location else "")
        else:
            detail = problem["msg"]
        parts.append(f"{location}: {detail}")
    return f"{where}: {'; '.join(parts)}"


def build_provider(
    route: Route,
) -> (
    OpenAIResponsesProvider | OpenAIChatCompletionsProvider | AnthropicMessagesProvider
):
    """The HTTP provider of ``route``, its API key given only to the client."""
    key = route.api_key.get_secret_value() if route.api_key is not None else None
    kind: type[
        OpenAIResponsesProvider
        | OpenAIChatCompletionsProvider
        | AnthropicMessagesProvider
    ] = {
        "responses": OpenAIResponsesProvider,
        "chat": OpenAIChatCompletionsProvider,
        "anthropic": AnthropicMessagesProvider,
    }[route.api]
    return kind(route.model, api_key=key, base_url=route.base_url)


def build_router(settings: Settings, route: str | None = None) -> ModelRouter:
    """A ModelRouter with one provider per configured route.

    Its default is ``route`` if given, else the configured default route.
    Raises NoModelConfiguredError if nothing is configured, UsageError
    listing the routes if ``route`` is not one. Close it with
    :func:`close_router`.
    """
    routes = settings.routes()
    default = settings.default_route(routes)
    if route is not None:
        if route not in routes:
            msg = f"no model route {route!r}; configured routes: {', '.join(routes)}"
            raise UsageError(msg)
        default = route
    router = ModelRouter(default, build_provider(routes[default]))
    for name, configured in routes.items():
        if name != default:
            router.register(name, build_provider(configured))
    return router


def close_router(router: ModelRouter) -> None:
    """Closes the HTTP clients of the router's providers.

    Call it before closing the runtime whose I/O loop ran them.
    """
    for provider in router.routes.values():
        if isinstance(provider, HttpModelProvider):
            provider.close()
