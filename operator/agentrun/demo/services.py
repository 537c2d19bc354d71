"""Three stand-in remote services with their own records, in one SQLite file.

The airline deduplicates on the ``Idempotency-Key`` it is sent, as a well-behaved payment or
booking API does; the SMS gateway does not (most don't), so a repeated send is a second message.
The payment service charges once per key and can be asked what it charged under one: the
lookup a settler asks (``booking-paid``).
``AGENTRUN_DEMO_DIR`` says where the file lives (default ``.agentrun``). A file
``release-STEP`` beside it ends a demo tool's linger at STEP at once (``booking``): what a test
that must hold a call in flight until it has seen something happen writes.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path


def services_path() -> Path:
    return Path(os.environ.get("AGENTRUN_DEMO_DIR", ".agentrun")) / "demo-services.db"


def released(step: str) -> bool:
    """Whoever holds the demo's calls let a linger at ``step`` end (the module's notes)."""
    return (services_path().parent / f"release-{step}").exists()


def _connect() -> sqlite3.Connection:
    path = services_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    connection = sqlite3.connect(path, timeout=10, isolation_level=None)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute(
        "CREATE TABLE IF NOT EXISTS bookings (key TEXT PRIMARY KEY, flight TEXT NOT NULL, "
        "passenger TEXT NOT NULL, seat TEXT NOT NULL, requests INTEGER NOT NULL DEFAULT 1)"
    )
    connection.execute(
        "CREATE TABLE IF NOT EXISTS messages (id INTEGER PRIMARY KEY, recipient TEXT NOT NULL, "
        "body TEXT NOT NULL)"
    )
    connection.execute(
        "CREATE TABLE IF NOT EXISTS charges (id INTEGER PRIMARY KEY, key TEXT UNIQUE NOT NULL, "
        "passenger TEXT NOT NULL, amount_cents INTEGER NOT NULL)"
    )
    return connection


def book_seat(flight: str, passenger: str, key: str) -> str:
    """Book a seat, or answer with the booking already made under ``key``."""
    with _connect() as connection:
        connection.execute("BEGIN IMMEDIATE")
        row = connection.execute("SELECT seat FROM bookings WHERE key = ?", (key,)).fetchone()
        if row is not None:
            connection.execute("UPDATE bookings SET requests = requests + 1 WHERE key = ?", (key,))
            connection.execute("COMMIT")
            return str(row[0])
        count = connection.execute("SELECT count(*) FROM bookings").fetchone()[0]
        seat = f"{12 + count}A"
        connection.execute(
            "INSERT INTO bookings (key, flight, passenger, seat) VALUES (?, ?, ?, ?)",
            (key, flight, passenger, seat),
        )
        connection.execute("COMMIT")
        return seat


def send_text(recipient: str, body: str) -> int:
    with _connect() as connection:
        cursor = connection.execute(
            "INSERT INTO messages (recipient, body) VALUES (?, ?)", (recipient, body)
        )
        return int(cursor.lastrowid or 0)


def bookings() -> list[tuple[str, str, str, int]]:
    with _connect() as connection:
        rows = connection.execute(
            "SELECT flight, passenger, seat, requests FROM bookings ORDER BY seat"
        ).fetchall()
        return [(str(f), str(p), str(s), int(r)) for f, p, s, r in rows]


def messages() -> list[tuple[str, str]]:
    with _connect() as connection:
        rows = connection.execute("SELECT recipient, body FROM messages ORDER BY id").fetchall()
        return [(str(r), str(b)) for r, b in rows]


def charge(passenger: str, amount_cents: int, key: str) -> dict[str, str | int]:
    """Charge the passenger's card, or answer with the charge already made under ``key``."""
    with _connect() as connection:
        connection.execute("BEGIN IMMEDIATE")
        connection.execute(
            "INSERT OR IGNORE INTO charges (key, passenger, amount_cents) VALUES (?, ?, ?)",
            (key, passenger, amount_cents),
        )
        connection.execute("COMMIT")
    found = charge_under(key)
    assert found is not None
    return found


def charge_under(key: str) -> dict[str, str | int] | None:
    """The receipt of the charge made under ``key``; None: nothing was charged under it."""
    with _connect() as connection:
        row = connection.execute(
            "SELECT id, passenger, amount_cents FROM charges WHERE key = ?", (key,)
        ).fetchone()
    if row is None:
        return None
    return {"charge": f"ch_{row[0]}", "passenger": str(row[1]), "amount_cents": int(row[2])}
