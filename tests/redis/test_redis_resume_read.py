"""Redis reads a resume's frontier, transcript and records in one script."""

from __future__ import annotations

from tests.support.resume_read import ResumeReadConformance


class TestRedisResumeRead(ResumeReadConformance):
    pass
