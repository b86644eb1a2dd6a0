"""Where things lie on a Mac, and what that means for the service: folders macOS guards, and model servers on the
local network. Said at setup, before the owner meets it as a service that fails without saying why.

- ``~/Documents``, ``~/Desktop``, ``~/Downloads`` and iCloud Drive (``~/Library/Mobile Documents``) are guarded by
  macOS's privacy checks: an app reads them only once allowed (that folder, or Full Disk Access). A checkout there
  holds the daemon's Python environment, so the service cannot even start its Python before Apple Flow has Full
  Disk Access; a workspace there fails the agent's commands with "Operation not permitted".
- A server on the local network (not loopback) needs the Local Network permission (macOS 15 and later), asked of
  the app that connects: the service (Apple Flow), not the terminal where setup checked the server.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from urllib.parse import urlsplit

GUARDED = {
    "Documents": "Documents",
    "Desktop": "Desktop",
    "Downloads": "Downloads",
    "Library/Mobile Documents": "iCloud Drive",
}
LOCAL_NETWORK_SETTINGS = "System Settings > Privacy & Security > Local Network"


def guarded_folder(path: Path, home: Path) -> str | None:
    """The name of the guarded folder ``path`` is in (or is), else None."""
    for folder, name in GUARDED.items():
        if path.is_relative_to(home / folder):
            return name
    return None


def checkout_note(checkout: Path, home: Path) -> str | None:
    where = guarded_folder(checkout, home)
    if where is None:
        return None
    return (
        f"This checkout ({checkout}) is in {where}, which macOS guards: the service starts its Python from here, so "
        f"it cannot start at all until Apple Flow has Full Disk Access (or macOS asks whether Apple Flow may "
        f"access {where} and you allow it). Grant Full Disk Access right after the install, or move the checkout "
        "to a folder such as ~/Developer and run ./scripts/setup.sh there."
    )


def workspace_note(workspace: Path, home: Path) -> str | None:
    where = guarded_folder(workspace, home)
    if where is None:
        return None
    return (
        f"The workspace {workspace} is in {where}, which macOS guards: until Apple Flow has Full Disk Access (or "
        f"is allowed {where} when macOS asks), the agent's commands there fail with \u201cOperation not "
        "permitted\u201d."
    )


def local_network_host(url: str) -> str | None:
    """The host of ``url`` when it is on the local network (a private or link-local address, a ``.local`` name, a
    name without a dot), else None (loopback, or a public host)."""
    host = urlsplit(url).hostname
    if not host or host == "localhost":
        return None
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host if host.endswith(".local") or "." not in host else None
    if address.is_loopback:
        return None
    return host if address.is_private or address.is_link_local else None


def local_network_note(url: str) -> str | None:
    host = local_network_host(url)
    if host is None:
        return None
    return (
        f"The model server {host} is on your local network: macOS asks whether Apple Flow may find and connect to "
        f"devices on your local network, and the service, not this terminal, must be allowed. Click Allow when "
        f"it asks (later: {LOCAL_NETWORK_SETTINGS} > Apple Flow); until then the agent cannot reach {host}."
    )
