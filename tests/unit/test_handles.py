"""Handles and allowlist entries reduce to one normal form."""

from __future__ import annotations

import pytest

from apple_flow.handles import normalize_handle


@pytest.mark.parametrize(
    "raw", ["+1 (555) 123-4567", "15551234567", "+15551234567", "(555) 123-4567", "tel:+15551234567"]
)
def test_us_numbers_in_any_format_are_one_person(raw: str) -> None:
    assert normalize_handle(raw) == "+15551234567"


def test_region_applies_only_to_numbers_without_a_country_code() -> None:
    assert normalize_handle("020 7946 0958", default_region="GB") == "+442079460958"
    assert normalize_handle("+442079460958", default_region="US") == "+442079460958"


def test_emails_are_lower_cased_and_lose_their_scheme() -> None:
    assert normalize_handle(" mailto:Ana.Lopez@iCloud.com ") == "ana.lopez@icloud.com"


@pytest.mark.parametrize("raw", ["console", "chat123456789", "12"])
def test_other_text_is_left_alone(raw: str) -> None:
    assert normalize_handle(raw) == raw
