"""``GET /``: the web console, one static page over the service's own API.

The page (``console.html``, plain JavaScript, CSS and inline SVG, no build
step) lists the tenant's sessions with their state and first prompt,
offers the agents for a new session, chats with one (streamed text, tool
calls with their arguments laid out, approval cards that say what is asked
and, once decided, who decided what), charts tokens and time per turn and
per model step (``GET .../executions``), and keeps the audit timeline and
its verification badge current as events arrive. Errors show in a banner
beside the control that failed. It asks for a bearer token and keeps it in
the tab's ``sessionStorage``; it reads the event stream with ``fetch`` so
that the token travels in the ``Authorization`` header, never in a URL
(which proxies and access logs keep), and resumes a dropped stream with
``Last-Event-ID``. The page itself is public: it holds no data, and every
call it makes is authenticated like any other client's. Its icon is inline
(a ``data:`` URL), so browsers ask for no ``/favicon.ico``.
"""

from __future__ import annotations

from importlib import resources

from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.routing import Route

PAGE = "console.html"
"""The page's file, beside this module."""


class Console:
    """The console's route; the page is read once, when it is first asked."""

    def __init__(self) -> None:
        self._page: str | None = None

    def routes(self) -> list[Route]:
        """The console's route."""
        return [Route("/", self.page, methods=["GET"])]

    async def page(self, _: Request) -> HTMLResponse:
        if self._page is None:
            self._page = (
                resources.files("turnlog.service").joinpath(PAGE).read_text("utf-8")
            )
        return HTMLResponse(
            self._page,
            headers={
                "Cache-Control": "no-cache",
                "X-Content-Type-Options": "nosniff",
                "Referrer-Policy": "no-referrer",
            },
        )


__all__ = ["Console"]
