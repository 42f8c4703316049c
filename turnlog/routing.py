"""Named model routes: one agent, several models, chosen per session."""

from __future__ import annotations

from collections.abc import Mapping

from turnlog.domain.errors import InvalidInputError, UsageError
from turnlog.domain.model import ModelProvider, is_provider


class ModelRouter:
    """Model providers by route name; ``default`` names the one used first.

    Args:
        default: the route a new session uses.
        provider: the default route's provider.
    """

    def __init__(self, default: str, provider: ModelProvider) -> None:
        self._routes: dict[str, ModelProvider] = {}
        self.default = default
        self.register(default, provider)

    def register(self, route: str, provider: ModelProvider) -> ModelRouter:
        """Adds ``route``; refuses a name already taken or a non-provider."""
        if not isinstance(route, str) or not route:
            msg = "a route needs a non-empty name"
            raise InvalidInputError(msg)
        if route in self._routes:
            msg = f"route {route!r} is already registered"
            raise UsageError(msg)
        if not is_provider(provider):
            msg = (
                f"route {route!r}: the model must provide "
                "'async respond(request, on_delta=...)'"
            )
            raise InvalidInputError(msg)
        self._routes[route] = provider
        return self

    @property
    def routes(self) -> Mapping[str, ModelProvider]:
        """Every route by name."""
        return dict(self._routes)

    def provider(self, route: str) -> ModelProvider:
        """The provider of ``route``; UsageError naming the known routes."""
        try:
            return self._routes[route]
        except KeyError:
            known = ", ".join(sorted(self._routes))
            msg = f"no model route {route!r}; known routes: {known}"
            raise UsageError(msg) from None
