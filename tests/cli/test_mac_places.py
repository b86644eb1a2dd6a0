"""Where things lie on a Mac: folders macOS guards, and model servers on the local network (whose connections need
the Local Network permission, asked of the service's app, not of the terminal)."""

from __future__ import annotations

from pathlib import Path

import pytest

from apple_flow.cli.mac_places import checkout_note, guarded_folder, local_network_host, local_network_note

HOME = Path("/Users/you")


@pytest.mark.parametrize(("path", "named"), [
    ("Documents", "Documents"),
    ("Documents/code/site", "Documents"),
    ("Desktop/x", "Desktop"),
    ("Downloads/apple-flow", "Downloads"),
    ("Library/Mobile Documents/com~apple~CloudDocs/site", "iCloud Drive"),
    ("Developer/site", None),
    ("DocumentsArchive/site", None),  # a name that only starts like a guarded one
])
def test_guarded_folders_are_named(path: str, named: str | None) -> None:
    assert guarded_folder(HOME / path, HOME) == named


def test_a_checkout_in_documents_is_explained_with_what_it_means_for_the_service() -> None:
    note = checkout_note(HOME / "Documents" / "apple-flow", HOME)
    assert note is not None
    assert "cannot start at all until Apple Flow has Full Disk Access" in note
    assert "~/Developer" in note
    assert checkout_note(HOME / "Developer" / "apple-flow", HOME) is None


@pytest.mark.parametrize(("url", "host"), [
    ("http://192.168.1.20:11434/v1", "192.168.1.20"),
    ("http://10.0.0.5:8080/v1", "10.0.0.5"),
    ("http://studio.local:1234/v1", "studio.local"),
    ("http://mac-studio:1234/v1", "mac-studio"),
    ("http://[fe80::1]:8080/v1", "fe80::1"),
    ("http://127.0.0.1:11434/v1", None),
    ("http://localhost:11434/v1", None),
    ("http://[::1]:8080/v1", None),
    ("https://api.example.com/v1", None),
    ("http://8.8.8.8/v1", None),
])
def test_a_server_on_the_local_network_is_told_apart_from_loopback_and_the_internet(url: str, host: str | None) -> None:
    assert local_network_host(url) == host


def test_the_local_network_note_names_the_service_not_the_terminal() -> None:
    note = local_network_note("http://192.168.1.20:11434/v1")
    assert note is not None
    assert "Apple Flow" in note and "not this terminal" in note
    assert "System Settings > Privacy & Security > Local Network" in note
    assert local_network_note("http://127.0.0.1:11434/v1") is None
