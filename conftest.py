"""Repository-wide pytest configuration: the Hypothesis profiles.

``default`` (quick), ``ci`` (derandomized, no database, print_blob) and ``nightly`` (20x
the ci budget, randomized, example database — Redis-backed when
``REMORA_HYPOTHESIS_REDIS`` is set).  Select with ``REMORA_HYPOTHESIS_PROFILE`` or
``--hypothesis-profile``; see ``remora/testing/profiles.py``.
"""

from __future__ import annotations

from hypothesis import settings

from remora.testing.profiles import register_profiles, selected_profile

register_profiles()
settings.load_profile(selected_profile())
