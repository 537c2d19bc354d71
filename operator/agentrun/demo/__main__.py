"""``python -m agentrun.demo``: what the stand-in airline and SMS gateway hold."""

from __future__ import annotations

import sys

from agentrun.demo import services


def main() -> int:
    what = sys.argv[1] if len(sys.argv) > 1 else "all"
    if what in ("bookings", "all"):
        rows = services.bookings()
        print(f"airline: {len(rows)} booking(s)")
        for flight, passenger, seat, requests in rows:
            print(f"  {flight}  {passenger}  seat {seat}  ({requests} request(s) with its key)")
    if what in ("messages", "all"):
        sent = services.messages()
        print(f"sms gateway: {len(sent)} message(s)")
        for recipient, body in sent:
            print(f"  to {recipient}: {body}")
    if what == "count-bookings":
        print(len(services.bookings()))
    if what == "count-messages":
        print(len(services.messages()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
