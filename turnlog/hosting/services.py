"""What a Runtime's sessions share: leases, the I/O loop, tools, approvals.

``RuntimeServices`` starts them one by one (the leases, the I/O loop, the
ToolExecutor on it, the ApprovalBroker actor, then the projection
follower and live trace export if asked for) and stops them newest first.
If one fails to start, what already runs is stopped before the error
goes on, so a Runtime that could not open leaves no thread behind.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pykka

from turnlog.actors.approval_broker import ApprovalBrokerActor
from turnlog.actors.io_loop import IoLoop
from turnlog.actors.session_parts import SessionServices
from turnlog.actors.tool_executor import ToolExecutor
from turnlog.domain.errors import LeaseLostError
from turnlog.projections.runner import ProjectionRunner
from turnlog.store.log import Store
from turnlog.store.ownership import SessionOwnership

if TYPE_CHECKING:
    from opentelemetry.sdk.trace.export import SpanExporter

# The Runtime's logger, not this module's: what a program filters on
# (README: turnlog.runtime) stays what it was before these moved here.
logger = logging.getLogger("turnlog.runtime")


class RuntimeServices:
    """The services one Runtime starts for its sessions (module docstring)."""

    def __init__(
        self,
        store: Store,
        projections: ProjectionRunner,
        *,
        max_tool_concurrency: int,
        follow_projections: bool,
        lease_seconds: float,
        span_exporter: SpanExporter | None,
        on_lease_lost: Callable[[str, LeaseLostError], None],
    ) -> None:
        self._stoppers: list[Callable[[], None]] = []
        try:
            self.ownership = SessionOwnership(
                store, lease_seconds=lease_seconds, on_lost=on_lease_lost
            )
            self._stoppers.append(self.ownership.release_all)
            self.io_loop = IoLoop()
            self._stoppers.append(self.io_loop.close)
            self.tool_executor = ToolExecutor(self.io_loop, max_tool_concurrency)
            self._stoppers.append(self.tool_executor.stop)
            self.broker = ApprovalBrokerActor.start(self.io_loop)
            self._stoppers.append(_stopper(self.broker))
            if follow_projections:
                store.add_listener(projections.notify)
                projections.start()
                self._stoppers.append(projections.stop)
            if span_exporter is not None:
                from turnlog.traces.live import LiveTraces  # noqa: PLC0415 - the otel extra

                traces = LiveTraces(store, span_exporter)
                store.add_listener(traces.notify)
                traces.start()
                self._stoppers.append(traces.stop)  # stopped first: flushes
        except BaseException:
            self.stop()
            raise
        self.for_sessions = SessionServices(
            store=store,
            io_loop=self.io_loop,
            tool_executor=self.tool_executor,
            approval_broker=self.broker,
        )
        """What every SessionActor of the runtime is handed."""

    def stop(self) -> None:
        """Stops the services, the newest first.

        One that fails (leases that cannot be given back to a failing
        store: they expire) is logged, and the rest still stop.
        """
        while self._stoppers:
            stopper = self._stoppers.pop()
            try:
                stopper()
            except Exception:  # whatever it was, the rest still stop
                logger.warning("could not stop %r cleanly", stopper, exc_info=True)


def _stopper(ref: pykka.ActorRef[Any]) -> Callable[[], None]:
    def stop() -> None:
        if ref.is_alive():
            ref.stop(block=True, timeout=10)

    return stop
