"""Whether the page's own name (``APPLE_FLOW_WEB_LOCAL_NAME``, apple-flow.localhost) opens in Safari on this Mac.

Chrome, Firefox and Edge resolve every name under ``.localhost`` to the loopback address themselves. Safari asks the
system resolver, which on macOS answers only the bare ``localhost``: the page's link then does not open in the Mac's
default browser. One line in ``/etc/hosts`` makes the name resolve for Safari too, and the page keeps its name, so
its cookie still goes to no other program on 127.0.0.1 or localhost (serving Safari at 127.0.0.1 instead would hand
the cookie to every local server it visits). Python's ``getaddrinfo`` asks the same system resolver as Safari, so
what it answers here is what Safari gets.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from apple_flow import host

Resolve = Callable[..., list[Any]]
RESOLVE: Resolve = socket.getaddrinfo  # the system resolver (tests stand in for an /etc/hosts they cannot edit)


def resolves_here(name: str, resolve: Resolve | None = None) -> bool:
    """Whether the system resolver (Safari's) gives ``name`` a loopback address."""
    try:
        answers = (resolve or RESOLVE)(name, None)
    except (OSError, UnicodeError):
        return False
    for answer in answers:
        try:
            if ipaddress.ip_address(str(answer[4][0]).split("%")[0]).is_loopback:
                return True
        except (ValueError, IndexError, TypeError):
            continue
    return False


def hosts_fix(name: str) -> str:
    """The commands that make ``name`` resolve for Safari (once; they ask for your password)."""
    return f"echo '127.0.0.1 {name}' | sudo tee -a /etc/hosts; sudo killall -HUP mDNSResponder"


def safari_note(name: str) -> str:
    """One sentence for a Mac whose Safari cannot open ``name``: why, and the fix."""
    return (
        f"Safari cannot open {name} on this Mac yet (Chrome and Firefox can): run once in Terminal: {hosts_fix(name)}"
    )


def safari_problem(url: str, resolve: Resolve | None = None) -> str:
    """On a Mac, why Safari cannot open the page at ``url`` (a name under .localhost) and the fix; "" when it can,
    for an IP address, or off a Mac."""
    name = urlsplit(url).hostname or ""
    if not host.is_macos() or not name.endswith(".localhost") or resolves_here(name, resolve):
        return ""
    return safari_note(name)
