"""Handles and allowlist entries reduce to one normal form."""

from __future__ import annotations

import re

import phonenumbers
import pytest
from pytest_mock import MockerFixture

from apple_flow.handles import HandleError, normalize_handle, parse_handle


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


@pytest.mark.parametrize(
    ("raw", "normal"),
    [
        ("(555) 123-4567", "+15551234567"),
        ("tel:+44 20 7946 0958", "+442079460958"),
        (" Me@iCloud.COM ", "me@icloud.com"),
    ],
)
def test_a_typed_handle_is_parsed_to_the_form_the_daemon_compares(raw: str, normal: str) -> None:
    assert parse_handle(raw) == normal


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ("12", "'12' is not a phone number: write it with its country code"),
        ("+1 555 123 45678901234", "is not a phone number"),
        ("me@icloud", "'me@icloud' is not an email address"),
        ("a b@example.com", "is not an email address"),
        ("call me", "'call me' is neither a phone number nor an email address"),
        ("1-800-FLOWERS", "is neither a phone number nor an email address"),
    ],
)
def test_a_handle_that_is_neither_is_refused_with_a_sentence(raw: str, says: str) -> None:
    with pytest.raises(HandleError, match=re.escape(says)):
        parse_handle(raw)


def test_a_handle_is_parsed_once_however_often_it_is_normalised(mocker: MockerFixture) -> None:
    # The daemon normalises the same handles several times per message; parsing one costs about 0.3 ms.
    normalize_handle.cache_clear()
    parse = mocker.spy(phonenumbers, "parse")
    assert [normalize_handle("(555) 010-9999") for _ in range(3)] == ["+15550109999"] * 3
    assert parse.call_count == 1
