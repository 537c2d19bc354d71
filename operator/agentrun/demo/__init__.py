"""The booking demo: an agent, an airline and a text-message outbox that keep their own books.

The airline and the outbox are SQLite files outside the kit's stores, standing in for remote
services: they are where a second seat or a second message would show up.
"""
