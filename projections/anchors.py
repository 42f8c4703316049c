"""Heads of sessions' hash chains, recorded away from their events.

A chain proves that nothing inside it was changed, but removing a
session's last events leaves a shorter chain that is just as intact. So
the head (seq and chain of the newest event) is recorded where the check
can find it:

- the sessions view keeps each session's head, and ``turnlog audit
  --verify`` holds the log to it (the view is in the same database: whoever
  can rewrite the events table can rewrite it too);
- ``turnlog audit --head SESSION`` prints it as an anchor for the user to
  keep elsewhere, and ``--verify --against ANCHOR`` checks the log against
  it: it proves everything up to the moment it was taken.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from turnlog.domain.chain import ChainHead
from turnlog.domain.errors import InvalidInputError, ReplayError
from turnlog.projections.sessions import SessionIndexProjection
from turnlog.projections.tables import ViewTables
from turnlog.store.log import Store
from turnlog.store.verify import ExpectedHead

SESSIONS_VIEW = SessionIndexProjection.name
FROM_VIEW = "the sessions view"
FROM_ANCHOR = "the anchor"

_DIGEST = re.compile(r"[0-9a-f]{64}")
_SEQ = re.compile(r"[1-9][0-9]{0,17}")
_SEQUENCE_LABELS = ("sequence=", "seq=")
"""How an anchor names its sequence: now, and as anchors printed before did."""


class Anchor(msgspec.Struct, frozen=True):
    """A head given by the user: ``seq`` 0 when only the digest was given."""

    session_id: str | None
    seq: int
    sha256: str

    def expected(self) -> ExpectedHead:
        """The head as :func:`turnlog.store.verify.verify_session` checks it."""
        return ExpectedHead(self.seq, self.sha256, FROM_ANCHOR)


def format_anchor(session_id: str, head: ChainHead) -> str:
    """The one-line anchor ``SESSION sequence=N sha256=HEX``.

    N is the sequence (the place in its session) of the newest event.
    """
    return f"{session_id} sequence={head.seq} sha256={head.digest}"


def anchor_record(session_id: str, head: ChainHead) -> str:
    """The anchor as one JSON object."""
    record = {"session_id": session_id, "sequence": head.seq, "sha256": head.digest}
    return msgspec.json.encode(record).decode()


def parse_anchor(text: str) -> Anchor:
    """Reads an anchor: ``HEX``, ``N:HEX`` or ``[SESSION] sequence=N sha256=HEX``.

    ``seq=N``, which ``turnlog audit --head`` printed before, is read too.

    Raises:
        InvalidInputError: ``text`` is none of these.
    """
    words = text.split()
    session_id: str | None = None
    label = words[-2].partition("=")[0] + "=" if len(words) >= 2 else ""
    if label in _SEQUENCE_LABELS and words[-1].startswith("sha256="):
        seq_text, digest = words[-2][len(label) :], words[-1][7:]
        # A session id may hold spaces: it is the text before " sequence=".
        session_id = text[: text.rindex(label)].strip() or None
    elif len(words) == 1 and ":" in words[0]:
        seq_text, digest = words[0].split(":", 1)
    elif len(words) == 1:
        seq_text, digest = "", words[0]
    else:
        seq_text = digest = ""
    digest = digest.lower()
    if not _DIGEST.fullmatch(digest) or (seq_text and not _SEQ.fullmatch(seq_text)):
        msg = (
            f"{text[:100]!r} is not an anchor: give what `turnlog audit --head` "
            "printed (SESSION sequence=N sha256=HEX), N:HEX or the 64-digit HEX "
            "alone"
        )
        raise InvalidInputError(msg)
    return Anchor(session_id, int(seq_text) if seq_text else 0, digest)


def anchor_of(text: str | None, session_id: str | None) -> Anchor | None:
    """The anchor ``text`` gives for ``session_id`` (None if no text).

    Raises:
        InvalidInputError: ``text`` is no anchor, or another session's.
    """
    if text is None:
        return None
    anchor = parse_anchor(text)
    if anchor.session_id not in (None, session_id):
        msg = f"the anchor is of session {anchor.session_id!r}, not {session_id!r}"
        raise InvalidInputError(msg)
    return anchor


def expected_heads(
    store: Store, session_id: str, anchor: Anchor | None = None
) -> list[ExpectedHead]:
    """The heads ``session_id``'s chain must reach: the view's, the anchor."""
    heads = recorded_heads(store, session_id).get(session_id, [])
    return heads if anchor is None else [*heads, anchor.expected()]


def _view_is_current(tables: ViewTables) -> bool:
    """Whether the sessions view was folded by this version (it holds heads)."""
    tracking = tables.tracking_row(SESSIONS_VIEW)
    return tracking is not None and tracking.version == SessionIndexProjection.version


def _head_in(doc: Any) -> ExpectedHead | None:
    if not isinstance(doc, dict):
        return None
    seq, digest = doc.get("head_seq"), doc.get("head_sha256")
    if not isinstance(seq, int) or seq < 1 or not isinstance(digest, str):
        return None
    return ExpectedHead(seq, digest, FROM_VIEW)


def recorded_heads(
    store: Store, session_id: str | None = None
) -> dict[str, list[ExpectedHead]]:
    """The heads the sessions view holds: of ``session_id``, or of every session.

    Read as the view stands, without folding anything new into it: what it
    recorded before the log was tampered with is the point. A view built
    by an older fold holds no heads; then nothing is expected.
    """
    tables = ViewTables(store)
    if not _view_is_current(tables):
        return {}
    parts = tables.parts(SESSIONS_VIEW) if session_id is None else [session_id]
    heads = {}
    for part in parts:
        head = _head_in(tables.get(SESSIONS_VIEW, part, 0))
        if head is not None:
            heads[part] = [head]
    return heads


def check_no_head_lost(tables: ViewTables, live: str, rebuilt: str) -> None:
    """Refuses a rebuilt sessions view that would forget a recorded head.

    A view rebuilt from empty takes each head from what the log holds now,
    so a log whose last events were removed would yield a shorter head that
    it matches: swapping it in would erase the one record of the removal.

    Raises:
        ReplayError: a session's head in ``rebuilt`` is behind the one in
            ``live`` or differs from it at the same seq.
    """
    if not _view_is_current(tables):
        return  # the live view holds no heads to lose
    lost = []
    for part in tables.parts(live):
        old = _head_in(tables.get(live, part, 0))
        new = _head_in(tables.get(rebuilt, part, 0))
        if old is None:
            continue
        if (
            new is None
            or new.seq < old.seq
            or (new.seq == old.seq and new.digest != old.digest)
        ):
            lost.append(part)
    if lost:
        names = ", ".join(map(repr, lost[:5])) + (" ..." if len(lost) > 5 else "")
        msg = (
            f"the log no longer reaches the chain head the sessions view holds "
            f"for {names}: events were removed (see `turnlog audit --verify "
            "--all`); the sessions view was not replaced"
        )
        raise ReplayError(msg)
