"""Settings from the environment and turnlog.toml, and the router built of them.

No test touches the network: providers are built, never called.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from run_support import API_KEY

from turnlog import InvalidInputError, UsageError
from turnlog.cli.run.settings import (
    ANTHROPIC_BASE_URL,
    DEFAULT_BASE_URL,
    NOT_CONFIGURED,
    NoModelConfiguredError,
    build_router,
    close_router,
    load_settings,
    user_config_path,
)
from turnlog.providers import (
    AnthropicMessagesProvider,
    OpenAIChatCompletionsProvider,
    OpenAIResponsesProvider,
)

LOCAL = "http://127.0.0.1:8080/v1"


def write_config(directory: Path, text: str) -> Path:
    path = directory / "turnlog.toml"
    path.write_text(text)
    return path


def test_nothing_configured_names_the_settings_and_the_demo(workspace: Path) -> None:
    settings = load_settings()
    assert settings.routes() == {}
    assert settings.config_path is None
    with pytest.raises(NoModelConfiguredError) as caught:
        build_router(settings)
    assert str(caught.value) == NOT_CONFIGURED
    assert "TURNLOG_MODEL" in NOT_CONFIGURED
    assert "turnlog demo" in NOT_CONFIGURED
    assert isinstance(caught.value, UsageError)  # the CLI exits 2


def test_the_environment_configures_the_default_route(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TURNLOG_MODEL", "gpt-test")
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    monkeypatch.setenv("TURNLOG_STORE", "memory://")
    settings = load_settings()
    assert settings.store == "memory://"
    [route] = settings.routes().values()
    assert (route.name, route.model, route.base_url, route.api) == (
        "default",
        "gpt-test",
        DEFAULT_BASE_URL,
        "responses",
    )
    router = build_router(settings)
    provider = router.provider("default")
    assert isinstance(provider, OpenAIResponsesProvider)
    assert provider.model == "gpt-test"
    assert provider.base_url == DEFAULT_BASE_URL
    close_router(router)  # never used: nothing to close, and no error


def test_base_url_and_api_come_from_the_environment(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TURNLOG_MODEL", "llama")
    monkeypatch.setenv("OPENAI_BASE_URL", LOCAL)
    monkeypatch.setenv("TURNLOG_API", "chat")
    router = build_router(load_settings())
    provider = router.provider("default")
    assert isinstance(provider, OpenAIChatCompletionsProvider)
    assert provider.base_url == LOCAL


def test_empty_variables_count_as_unset(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TURNLOG_MODEL", "")
    monkeypatch.setenv("OPENAI_BASE_URL", "")
    settings = load_settings()
    assert settings.routes() == {}
    assert settings.environment.base_url == DEFAULT_BASE_URL


def test_a_bad_api_is_named_without_its_value(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TURNLOG_API", "graphql-of-doom")
    with pytest.raises(InvalidInputError) as caught:
        load_settings()
    message = str(caught.value)
    assert message.startswith("environment: TURNLOG_API: ")
    assert "'responses', 'chat' or 'anthropic'" in message
    assert "graphql-of-doom" not in message
    assert "\n" not in message


def test_the_api_key_is_never_shown(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TURNLOG_MODEL", "gpt-test")
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    settings = load_settings()
    [route] = settings.routes().values()
    router = build_router(settings)
    shown = [
        repr(settings),
        str(settings),
        repr(route),
        route.describe(),
        repr(router.provider("default")),
        settings.model_dump_json(),
    ]
    assert all(API_KEY not in text for text in shown)
    assert route.api_key is not None
    assert route.api_key.get_secret_value() == API_KEY


def test_the_openai_api_without_a_key_is_refused_early(workspace: Path) -> None:
    write_config(workspace, '[routes.cloud]\nmodel = "gpt-test"\n')
    with pytest.raises(UsageError, match=r"needs an API key: set \$OPENAI_API_KEY"):
        build_router(load_settings())


def test_a_local_server_needs_no_key(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TURNLOG_MODEL", "llama")
    monkeypatch.setenv("OPENAI_BASE_URL", LOCAL)
    [route] = load_settings().routes().values()
    assert route.api_key is None


def test_routes_come_from_the_users_turnlog_toml(
    workspace: Path, user_config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOCAL_KEY", "local-secret-key")
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    path = write_config(
        user_config.parent,
        f"""
default_route = "fast"

[routes.smart]
model = "gpt-test"

[routes.fast]
model = "llama"
base_url = "{LOCAL}"
api = "chat"
api_key_env = "LOCAL_KEY"
""",
    )
    settings = load_settings()
    assert settings.config_path == path
    routes = settings.routes()
    assert list(routes) == ["smart", "fast"]
    fast, smart = routes["fast"], routes["smart"]
    assert (fast.model, fast.base_url, fast.api) == ("llama", LOCAL, "chat")
    assert fast.api_key is not None
    assert fast.api_key.get_secret_value() == "local-secret-key"
    # What a route leaves out comes from the environment.
    assert (smart.base_url, smart.api) == (DEFAULT_BASE_URL, "responses")
    assert smart.api_key is not None
    assert smart.api_key.get_secret_value() == API_KEY

    router = build_router(settings)
    assert router.default == "fast"
    assert set(router.routes) == {"fast", "smart"}
    assert isinstance(router.provider("fast"), OpenAIChatCompletionsProvider)
    assert isinstance(router.provider("smart"), OpenAIResponsesProvider)
    assert build_router(settings, "smart").default == "smart"


def test_without_default_route_the_first_route_is_the_default(
    workspace: Path,
    user_config: Path,
) -> None:
    write_config(
        user_config.parent,
        f'[routes.b]\nmodel = "m1"\nbase_url = "{LOCAL}"\n'
        f'[routes.a]\nmodel = "m2"\nbase_url = "{LOCAL}"\n',
    )
    assert build_router(load_settings()).default == "b"


def test_turnlog_model_replaces_the_default_route_of_the_file(
    workspace: Path, user_config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_config(
        user_config.parent,
        f'[routes.default]\nmodel = "from-file"\nbase_url = "{LOCAL}"\n'
        f'[routes.other]\nmodel = "other"\nbase_url = "{LOCAL}"\n',
    )
    monkeypatch.setenv("TURNLOG_MODEL", "from-env")
    monkeypatch.setenv("OPENAI_BASE_URL", LOCAL)
    settings = load_settings()
    routes = settings.routes()
    assert routes["default"].model == "from-env"
    assert build_router(settings).default == "default"


def test_an_unset_api_key_env_is_named(workspace: Path, user_config: Path) -> None:
    write_config(
        user_config.parent,
        f'[routes.fast]\nmodel = "m"\nbase_url = "{LOCAL}"\n'
        'api_key_env = "NO_SUCH_KEY"\n',
    )
    with pytest.raises(UsageError, match=r"\$NO_SUCH_KEY, which is not set"):
        load_settings().routes()


def test_an_unknown_route_lists_the_configured_ones(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TURNLOG_MODEL", "m")
    monkeypatch.setenv("OPENAI_BASE_URL", LOCAL)
    with pytest.raises(
        UsageError, match=r"^no model route 'fast'; configured routes: default$"
    ):
        build_router(load_settings(), "fast")


def test_an_unknown_default_route_lists_the_configured_ones(
    workspace: Path, user_config: Path
) -> None:
    write_config(
        user_config.parent,
        f'default_route = "nope"\n[routes.a]\nmodel = "m"\nbase_url = "{LOCAL}"\n',
    )
    with pytest.raises(UsageError, match=r"default_route 'nope' is not a route.*: a$"):
        build_router(load_settings())


def test_a_key_in_the_file_is_refused_without_being_echoed(workspace: Path) -> None:
    write_config(
        workspace,
        f'[routes.a]\nmodel = "m"\napi_key = "{API_KEY}"\n',
    )
    with pytest.raises(InvalidInputError) as caught:
        load_settings()
    message = str(caught.value)
    assert "routes.a.api_key: unknown setting" in message
    assert "api_key_env" in message  # where the key goes instead
    assert API_KEY not in message


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[routes.a\nmodel = 1", "is not valid TOML"),
        ('[routes.a]\nbase_url = "http://x"\n', "routes.a.model: Field required"),
        ('[routes.a]\nmodel = "m"\napi = "soap"\n', "routes.a.api: Input should be"),
        ('colour = "blue"\n', "colour: unknown setting"),
    ],
)
def test_a_malformed_file_is_one_clear_line(
    workspace: Path, text: str, expected: str
) -> None:
    write_config(workspace, text)
    with pytest.raises(InvalidInputError) as caught:
        load_settings()
    message = str(caught.value)
    assert expected in message
    assert "turnlog.toml" in message
    assert "\n" not in message


def test_a_bad_base_url_is_named(workspace: Path, user_config: Path) -> None:
    write_config(
        user_config.parent, '[routes.a]\nmodel = "m"\nbase_url = "ftp://host/v1"\n'
    )
    with pytest.raises(UsageError, match="route 'a': base_url must be an http"):
        load_settings().routes()


def test_turnlog_config_names_the_file(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = tmp_path / "elsewhere.toml"
    elsewhere.write_text(f'[routes.x]\nmodel = "m"\nbase_url = "{LOCAL}"\n')
    write_config(workspace, f'[routes.ignored]\nmodel = "m"\nbase_url = "{LOCAL}"\n')
    monkeypatch.setenv("TURNLOG_CONFIG", str(elsewhere))
    settings = load_settings()
    assert settings.config_path == elsewhere
    assert list(settings.routes()) == ["x"]


def test_turnlog_config_naming_no_file_is_an_error(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TURNLOG_CONFIG", str(workspace / "missing.toml"))
    with pytest.raises(
        InvalidInputError, match=r"TURNLOG_CONFIG names .*missing\.toml"
    ):
        load_settings()


# -- trust: who may say where a key goes -----------------------------------


@pytest.mark.parametrize(
    ("route", "refused"),
    [
        (f'base_url = "{LOCAL}"', "routes.x.base_url"),
        ('api_key_env = "GITHUB_TOKEN"', "routes.x.api_key_env"),
    ],
)
def test_a_turnlog_toml_found_here_may_not_say_where_a_key_goes(
    workspace: Path,
    user_config: Path,
    monkeypatch: pytest.MonkeyPatch,
    route: str,
    refused: str,
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", API_KEY)
    path = write_config(workspace, f'[routes.x]\nmodel = "m"\n{route}\n')
    with pytest.raises(InvalidInputError) as caught:
        load_settings()
    message = str(caught.value)
    assert message.startswith(f"{path}: {refused} refused: ")
    assert "--config or TURNLOG_CONFIG" in message
    assert str(user_config) in message  # the other way to trust it
    assert API_KEY not in message
    assert "\n" not in message


def test_a_file_the_user_names_is_trusted(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOCAL_KEY", API_KEY)
    path = write_config(
        workspace,
        f'[routes.x]\nmodel = "m"\nbase_url = "{LOCAL}"\napi_key_env = "LOCAL_KEY"\n',
    )
    for settings in (
        load_settings(config=Path("turnlog.toml")),  # --config, relative
        load_settings(config=path),
    ):
        [route] = settings.routes().values()
        assert route.base_url == LOCAL
        assert route.api_key is not None
        assert route.api_key.get_secret_value() == API_KEY
    monkeypatch.setenv("TURNLOG_CONFIG", str(path))
    assert load_settings().routes()["x"].base_url == LOCAL


def test_config_naming_no_file_is_an_error(workspace: Path) -> None:
    with pytest.raises(InvalidInputError, match=r"^--config names nope\.toml, which"):
        load_settings(config=Path("nope.toml"))


def test_a_turnlog_toml_found_here_picks_among_the_users_routes(
    workspace: Path, user_config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOCAL_KEY", API_KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    user_config.write_text(
        'default_route = "local"\n'
        f'[routes.local]\nmodel = "llama"\nbase_url = "{LOCAL}"\n'
        'api_key_env = "LOCAL_KEY"\n'
    )
    project = write_config(
        workspace,
        'default_route = "local"\n'
        '[routes.local]\nmodel = "qwen"\napi = "chat"\n'
        '[routes.extra]\nmodel = "other"\n',
    )
    settings = load_settings()
    assert (settings.config_path, settings.project_path) == (user_config, project)
    routes = settings.routes()
    assert list(routes) == ["local", "extra"]
    local = routes["local"]
    # The model and API are the project's; the endpoint and key stay the user's.
    assert (local.model, local.api, local.base_url) == ("qwen", "chat", LOCAL)
    assert local.api_key is not None
    assert local.api_key.get_secret_value() == API_KEY
    # A new route goes where the user's environment says.
    assert routes["extra"].base_url == "http://127.0.0.1:9/v1"
    assert routes["extra"].api_key is None


def test_the_users_config_directory_follows_xdg(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    path = home / ".config" / "turnlog" / "turnlog.toml"
    path.parent.mkdir(parents=True)
    path.write_text(f'[routes.h]\nmodel = "m"\nbase_url = "{LOCAL}"\n')
    monkeypatch.setenv("HOME", str(home))
    # Relative XDG_CONFIG_HOME is ignored, as the XDG spec says.
    for value in ("", "relative/dir"):
        monkeypatch.setenv("XDG_CONFIG_HOME", value)
        assert user_config_path() == path
        assert load_settings().routes()["h"].base_url == LOCAL


def test_in_the_users_config_directory_its_file_is_trusted(
    user_config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    user_config.write_text(f'[routes.u]\nmodel = "m"\nbase_url = "{LOCAL}"\n')
    monkeypatch.chdir(user_config.parent)
    settings = load_settings()
    assert settings.project_path is None
    assert settings.routes()["u"].base_url == LOCAL


def test_the_anthropic_api_takes_anthropics_key_and_url(
    workspace: Path, user_config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-not-for-anthropic")
    user_config.write_text(
        '[routes.claude]\nmodel = "claude-test"\napi = "anthropic"\n'
        '[routes.gpt]\nmodel = "gpt-test"\n'
    )
    settings = load_settings()
    routes = settings.routes()
    claude = routes["claude"]
    assert (claude.base_url, claude.api_key_env) == (
        ANTHROPIC_BASE_URL,
        "ANTHROPIC_API_KEY",
    )
    assert claude.api_key is not None
    assert claude.api_key.get_secret_value() == API_KEY
    assert routes["gpt"].api_key_env == "OPENAI_API_KEY"
    router = build_router(settings, "claude")
    assert isinstance(router.provider("claude"), AnthropicMessagesProvider)
    close_router(router)
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    with pytest.raises(UsageError, match=r"needs an API key: set \$ANTHROPIC_API_KEY"):
        load_settings().routes()


def test_turnlog_api_anthropic_configures_the_default_route(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TURNLOG_MODEL", "claude-test")
    monkeypatch.setenv("TURNLOG_API", "anthropic")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", LOCAL)
    [route] = load_settings().routes().values()
    assert (route.api, route.base_url, route.api_key) == ("anthropic", LOCAL, None)


def test_a_turnlog_toml_found_here_may_not_switch_a_route_to_another_key(
    workspace: Path, user_config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Switching a trusted route between OpenAI and Anthropic would send the
    other provider's key to the route's endpoint."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
    user_config.write_text(f'[routes.proxy]\nmodel = "m"\nbase_url = "{LOCAL}"\n')
    write_config(workspace, '[routes.proxy]\nmodel = "m"\napi = "anthropic"\n')
    with pytest.raises(InvalidInputError, match=r"routes\.proxy\.api refused"):
        load_settings()
