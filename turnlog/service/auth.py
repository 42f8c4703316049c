"""Bearer tokens, each scoped to a tenant, kept only as SHA-256 digests.

Tokens come from settings as ``TENANT=SECRET`` entries, where ``SECRET`` is
either ``sha256:HEX`` (the digest of the token: what a settings file
should hold) or the token itself (hashed as it is read, the plain text
dropped). SHA-256 without a salt is enough for tokens of high entropy
(``secrets.token_urlsafe(32)``); it is not for passwords. A presented token
is hashed and compared with every known digest in constant time, so the
time of an answer tells nothing about how close a guess came.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path

from starlette.requests import HTTPConnection

from turnlog.domain.errors import InvalidInputError
from turnlog.service.problems import Problem

TOKENS_ENV = "TURNLOG_SERVICE_TOKENS"
"""Environment variable with ``TENANT=SECRET`` entries, separated by commas."""

_TENANT = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_DIGEST = re.compile(r"sha256:([0-9a-f]{64})")


def token_digest(token: str) -> str:
    """``sha256:HEX`` of a token: what settings may hold instead of it."""
    return "sha256:" + hashlib.sha256(token.encode()).hexdigest()


class ServiceTokens:
    """The tenants' bearer tokens, as digests.

    Args:
        entries: ``(tenant, secret)`` pairs; a secret is ``sha256:HEX`` or
            the token itself.

    Raises:
        InvalidInputError: a tenant name that is not 1-64 letters, digits,
            ``_``, ``.`` or ``-``, or an empty secret.
    """

    def __init__(self, entries: Iterable[tuple[str, str]]) -> None:
        self._digests: list[tuple[bytes, str]] = []
        for tenant, secret in entries:
            if not _TENANT.fullmatch(tenant):
                msg = f"tenant name {tenant!r} must be 1-64 of A-Z a-z 0-9 _ . -"
                raise InvalidInputError(msg)
            if not secret:
                msg = f"tenant {tenant!r} has an empty token"
                raise InvalidInputError(msg)
            digest = _DIGEST.fullmatch(secret.lower())
            hexed = (
                digest.group(1)
                if digest is not None
                else hashlib.sha256(secret.encode()).hexdigest()
            )
            self._digests.append((bytes.fromhex(hexed), tenant))

    @classmethod
    def parse(cls, text: str) -> ServiceTokens:
        """Tokens from ``TENANT=SECRET,TENANT=SECRET`` (the environment form)."""
        entries = []
        for part in text.split(","):
            if not part.strip():
                continue
            tenant, sep, secret = part.strip().partition("=")
            if not sep:
                msg = f"{TOKENS_ENV} entries are TENANT=SECRET, not {part.strip()!r}"
                raise InvalidInputError(msg)
            entries.append((tenant.strip(), secret.strip()))
        return cls(entries)

    @classmethod
    def from_file(cls, path: Path) -> ServiceTokens:
        """Tokens from a TOML file's ``[tokens]`` table (``tenant = "sha256:..."``)."""
        try:
            data = tomllib.loads(path.read_text())
        except (OSError, tomllib.TOMLDecodeError) as error:
            msg = f"cannot read the tokens file {path}: {error}"
            raise InvalidInputError(msg) from None
        table = data.get("tokens")
        if not isinstance(table, Mapping) or not all(
            isinstance(value, str) for value in table.values()
        ):
            msg = f'{path}: expected a [tokens] table of tenant = "sha256:HEX"'
            raise InvalidInputError(msg)
        return cls(table.items())

    @classmethod
    def from_environment(cls) -> ServiceTokens | None:
        """Tokens from ``TURNLOG_SERVICE_TOKENS``, or None if it is unset."""
        text = os.environ.get(TOKENS_ENV)
        return None if text is None else cls.parse(text)

    @property
    def tenants(self) -> list[str]:
        """The tenants that have a token, sorted."""
        return sorted({tenant for _, tenant in self._digests})

    def tenant_of(self, token: str) -> str | None:
        """The tenant ``token`` belongs to, or None.

        Every digest is compared, found or not, in constant time.
        """
        presented = hashlib.sha256(token.encode()).digest()
        found = None
        for digest, tenant in self._digests:
            if hmac.compare_digest(presented, digest):
                found = tenant
        return found

    def authenticate(self, connection: HTTPConnection) -> str:
        """The tenant of a request's ``Authorization: Bearer`` token.

        Raises:
            Problem: 401, for a missing, malformed or unknown token.
        """
        header = connection.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        tenant = (
            self.tenant_of(token.strip())
            if scheme.lower() == "bearer" and token.strip()
            else None
        )
        if tenant is None:
            detail = (
                "a bearer token is required"
                if not header
                else "the bearer token is not valid"
            )
            raise Problem(401, detail, headers={"WWW-Authenticate": "Bearer"})
        return tenant


__all__ = ["TOKENS_ENV", "ServiceTokens", "token_digest"]
