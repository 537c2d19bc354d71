"""PostgreSQL reads a resume's frontier, transcript and records in one statement."""

from __future__ import annotations

from tests.support.resume_read import ResumeReadConformance


class TestPostgresResumeRead(ResumeReadConformance):
    pass
