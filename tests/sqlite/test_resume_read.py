"""SQLite reads a resume's frontier, transcript and records in one read transaction."""

from __future__ import annotations

from tests.support.resume_read import ResumeReadConformance


class TestSqliteResumeRead(ResumeReadConformance):
    pass
