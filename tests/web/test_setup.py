"""Serving the page: loopback unless a setting says otherwise, the token created into .env (0600) when missing,
a port in use is a clear error."""

from __future__ import annotations

import socket
import stat
from pathlib import Path

import pytest
from starlette.applications import Starlette

from apple_flow.config import SettingsError, load_settings
from apple_flow.envfile import set_value
from apple_flow.web.server import WebError, WebServer, ensure_token


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_another_interface_needs_allow_remote() -> None:
    with pytest.raises(SettingsError, match=r"APPLE_FLOW_WEB_HOST=0\.0\.0\.0 is not a loopback address"):
        load_settings(env_file=None, web_host="0.0.0.0")
    assert load_settings(env_file=None, web_host="0.0.0.0", web_allow_remote=True).web.host == "0.0.0.0"
    for host in ("127.0.0.1", "127.0.0.2", "::1", "localhost"):
        assert load_settings(env_file=None, web_host=host).web.host == host
    with pytest.raises(SettingsError, match="APPLE_FLOW_WEB_BASE_URL"):
        load_settings(env_file=None, web_base_url="mac.example")
    assert load_settings(env_file=None, web_base_url="https://mac.ts.net/").web.base_url == "https://mac.ts.net"
    with pytest.raises(SettingsError, match="APPLE_FLOW_WEB_TOKEN: must be at least 32 characters") as weak:
        load_settings(env_file=None, web_token="a-sixteen-chars-token-0123456789"[:31])
    assert "a-sixteen" not in str(weak.value)  # a secret is never echoed into a log
    assert load_settings(env_file=None, web_token="x" * 32).web.token == "x" * 32


def test_a_missing_token_is_created_in_env_keeping_every_other_line(tmp_path: Path) -> None:
    env = tmp_path / ".env"
    env.write_text("# my settings\nAPPLE_FLOW_ALLOWED_SENDERS=+15551234567\n# APPLE_FLOW_WEB_TOKEN=\nOTHER=1\n")
    env.chmod(0o644)
    token = ensure_token(load_settings(env_file=env), env)
    assert len(token) >= 40
    assert env.read_text() == (
        f"# my settings\nAPPLE_FLOW_ALLOWED_SENDERS=+15551234567\n# APPLE_FLOW_WEB_TOKEN=\n"
        f"APPLE_FLOW_WEB_TOKEN={token}\nOTHER=1\n"
    )
    assert mode(env) == 0o600
    assert load_settings(env_file=env).web.token == token  # the next start reads it
    assert ensure_token(load_settings(env_file=env), env) == token


def test_a_token_in_a_readable_env_makes_it_private(tmp_path: Path) -> None:
    env = tmp_path / ".env"
    env.write_text("APPLE_FLOW_WEB_TOKEN=an-old-token-of-mine-0123456789-abcdef\n")
    env.chmod(0o644)
    assert ensure_token(load_settings(env_file=env), env) == "an-old-token-of-mine-0123456789-abcdef"
    assert mode(env) == 0o600


def test_a_new_env_is_created_private_and_a_set_value_replaces_the_last_setting(tmp_path: Path) -> None:
    env = tmp_path / "sub" / ".env"
    ensure_token(load_settings(env_file=None), env)
    assert mode(env) == 0o600 and env.read_text().startswith("APPLE_FLOW_WEB_TOKEN=")
    env.write_text("A=1\nexport A=2\n")
    set_value(env, "A", "3")
    assert env.read_text() == "A=1\nA=3\n"
    with pytest.raises(ValueError):
        set_value(env, "A", "two\nlines")


def test_a_token_that_cannot_be_saved_is_a_clear_error(tmp_path: Path) -> None:
    folder = tmp_path / "readonly"
    folder.mkdir()
    (folder / ".env").mkdir()  # a folder where the file should be: unwritable for root too
    with pytest.raises(WebError, match="Cannot save a new web token"):
        ensure_token(load_settings(env_file=None), folder / ".env")


def test_a_port_in_use_is_a_clear_error() -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        with pytest.raises(WebError, match=f"127.0.0.1:{port}.*APPLE_FLOW_WEB_PORT"):
            WebServer(Starlette(), "127.0.0.1", port).start()
