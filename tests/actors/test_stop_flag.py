"""A pooled actor's stopped flag: what pykka reads of it, as one object."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pykka
import pytest

from turnlog.actors.actor_pool import ActorPool, PooledActor
from turnlog.actors.stop_flag import StopFlag

WAIT = 10.0


def test_a_flag_is_clear_until_set_and_a_wait_on_it_times_out() -> None:
    flag = StopFlag()
    assert not flag.is_set()
    assert flag.wait(0.01) is False
    flag.set()
    assert flag.is_set()
    assert flag.wait(0) is True


def test_setting_the_flag_wakes_a_thread_waiting_on_it() -> None:
    flag = StopFlag()
    waiting = threading.Event()
    answers: list[bool] = []

    def wait() -> None:
        waiting.set()
        answers.append(flag.wait(WAIT))

    waiter = threading.Thread(target=wait)
    waiter.start()
    assert waiting.wait(WAIT)
    flag.set()
    waiter.join(WAIT)
    assert answers == [True]


class Quiet(PooledActor):
    def on_receive(self, message: object) -> object:
        return message


@pytest.fixture
def quiet() -> Iterator[type[Quiet]]:
    class OnOwnPool(Quiet):
        pool = ActorPool(idle_seconds=WAIT, name="StopFlagWorker")

    yield OnOwnPool
    pykka.ActorRegistry.stop_all(timeout=WAIT)


def test_a_pooled_actor_and_its_ref_share_one_flag_and_no_event(
    quiet: type[Quiet],
) -> None:
    ref = quiet.start()
    actor = ref._actor_weakref()
    assert actor is not None
    assert isinstance(actor.actor_stopped, StopFlag)
    assert ref.actor_stopped is actor.actor_stopped
    assert ref.ask("ping", timeout=WAIT) == "ping"
    assert ref.is_alive()
    ref.stop(timeout=WAIT)
    assert not ref.is_alive()
    assert ref.actor_stopped.wait(0)
    with pytest.raises(pykka.ActorDeadError):
        ref.tell("after the stop")
