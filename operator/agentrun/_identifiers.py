"""What a tenant, a run id and a record's key may be: the same whichever store keeps them.

Every store keys what it keeps by (tenant, run id) and, for idempotency records and charges, a
key; the quota store by (tenant, scope) and a run id or a window. Three kinds of id that one
store would take and another cannot are refused here, with a ``ConfigurationError`` naming the
id, before any store is asked, so that every store accepts what the others accept and none fails
halfway through a call:

* Text that is not valid Unicode. Python turns a byte that is not UTF-8 (in a command-line
  argument, an environment variable) into a lone surrogate, which UTF-8 cannot encode: the SQLite
  and Redis drivers raised a bare ``UnicodeEncodeError`` from inside the call.
* A NUL character, which PostgreSQL's ``text`` cannot hold.
* An id too long for PostgreSQL's indexes. A B-tree entry holds at most 2,704 bytes, and the
  widest index is (tenant, run id, key) with a few bytes of overhead per column, so a tenant and
  a run id hold at most ``MAX_ID_BYTES`` of UTF-8 each and a key ``MAX_KEY_BYTES``: 2,560 in all.
  The kit's own keys are digests of well under 100 bytes; a run id is whatever a person chose,
  and PostgreSQL refused one too long only once the row was written, after a tool had run.
"""

from __future__ import annotations

from agentrun._errors import ConfigurationError

MAX_ID_BYTES = 1024
"""The most UTF-8 bytes a tenant or a run id may take, on every store."""

MAX_KEY_BYTES = 512
"""The most UTF-8 bytes an idempotency key, a charge id, a quota's scope or a budget's window may
take, on every store."""


def _check(what: str, value: str, limit: int) -> None:
    # Every store call checks its ids, a boundary three times: the usual id (ASCII, no NUL, short)
    # is decided by three C-level tests before anything is encoded or quoted for an error.
    if len(value) <= limit and value.isascii() and "\x00" not in value:
        return
    shown = repr(value) if len(value) <= 80 else f"{value[:60]!r}... ({len(value)} characters)"
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError as error:
        raise ConfigurationError(
            f"{what} {shown} is not valid Unicode: character {error.start} is a lone "
            "surrogate, which is what Python makes of a byte that is not UTF-8. Give the "
            f"{what} as UTF-8 text."
        ) from None
    if "\x00" in value:
        raise ConfigurationError(
            f"{what} {shown} holds a NUL character, which no store can key on; drop it"
        )
    if size > limit:
        raise ConfigurationError(
            f"{what} {shown} is {size} bytes of UTF-8, over the limit of {limit} that every "
            "store keeps (PostgreSQL's indexes hold about 2.7 KB of tenant, run id and key "
            f"together); use a shorter {what}"
        )


def check_tenant(tenant: str) -> None:
    """Refuse a tenant that some store cannot key on."""
    _check("tenant", tenant, MAX_ID_BYTES)


def check_run(tenant: str, run_id: str) -> None:
    """Refuse a tenant or run id that some store cannot key on."""
    check_tenant(tenant)
    _check("run id", run_id, MAX_ID_BYTES)


def check_key(what: str, key: str) -> None:
    """Refuse a record key (``what`` names it in the error) that some store cannot key on."""
    _check(what, key, MAX_KEY_BYTES)


def check_name(what: str, name: str) -> None:
    """Refuse a name that keys a record beside the tenant (a quota's scope, a budget's window:
    ``what`` says which) when it is empty, which names nothing, or some store cannot key on it."""
    if not name:
        raise ConfigurationError(f"{what} is empty; name the {what}")
    _check(what, name, MAX_KEY_BYTES)
