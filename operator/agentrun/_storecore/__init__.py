"""What every store shares, whoever wrote it: the checks, the fence refusal and the error policy.

The four adapters (memory, SQLite, Redis, PostgreSQL) and any third-party store differ in how
they keep a run; they must not differ in what they refuse and how they say it. So:

* ``checked``: the id, key and TTL checks, applied once in front of every store of a
  ``StoreSet`` (what ``open_backend`` returns, and what a third-party backend is built as), so a
  store receives only ids every store can key on and never checks them itself.
* ``fences``: the one place a ``StaleFenceError`` is made from what a store found.
* ``classify``: which driver errors are retryable and which are refusals, one table per driver,
  and the unreadable-record error every store raises the same way.

It sits beside the store contracts, below the adapters, and imports no driver: the tables name
error codes, and each adapter reads the code off its driver's error.
"""
