"""A fake ``launchctl`` for the service tests: records every argv and keeps a job table like launchd's GUI domain,
with launchd's exit codes and error texts, and its timing edges made controllable:

- ``bootout`` of a job that is not loaded exits 3 ("Boot-out failed: 3: No such process");
- after ``bootout`` the job stays in the domain for ``linger`` more ``print`` polls (launchd removes it in the
  background), and a ``bootstrap`` of the same label meanwhile fails with "Bootstrap failed: 5: Input/output error";
- the next ``busy`` bootstraps fail with ``busy_code`` (5 or 37) whatever the state;
- with ``run`` on, ``bootstrap`` of a ``RunAtLoad`` job starts its ``ProgramArguments`` as launchd would (the
  plist's environment only, its working folder and log files), ``bootout`` stops it and ``kickstart -k`` stops
  and starts it again;
- a target in ``disabled`` (``launchctl disable``, or "Allow in the Background" switched off) fails ``bootstrap``
  with 5 until ``enable``; with ``background_off`` (the switch under Login Items) ``enable`` does not help;
  ``print-disabled`` lists it as ``"<label>" => disabled``; ``switch_off`` is the owner switching the running
  service off under Login Items (macOS unloads it and keeps it disabled).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

SCRIPT = r'''#!{python}
import json, os, plistlib, signal, subprocess, sys, time
home = os.environ["FAKE_LAUNCHCTL_HOME"]
with open(os.path.join(home, "calls.log"), "a") as log:
    log.write(" ".join(sys.argv[1:]) + "\n")
path = os.path.join(home, "state.json")
with open(path) as f:
    state = json.load(f)

def save():
    with open(path, "w") as f:
        json.dump(state, f)

def fail(code, text):
    save()
    sys.stderr.write(text + "\n")
    sys.exit(code)

def stop(job):
    pid = job.get("pid")
    if pid:
        try:
            os.killpg(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass

def wait_gone(pid):
    for _ in range(600):
        try:
            with open("/proc/%d/stat" % pid) as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return
        except (OSError, IndexError):
            return
        time.sleep(0.05)

# With keepalive on: launchd's KeepAlive, one supervisor per job (the leader of the job's process group), which starts
# the program again each time it exits, no sooner than ThrottleInterval after its last start, and keeps the running
# program's pid in the job's pidfile and each run's start, end and exit status in its runs file (JSON lines).
SUPERVISOR = """
import json, subprocess, sys, time
spec = json.loads(sys.argv[1])
while True:
    started = time.time()
    out, err = open(spec["out"], "ab"), open(spec["err"], "ab")
    process = subprocess.Popen(spec["argv"], cwd=spec["cwd"], env=spec["env"], stdin=subprocess.DEVNULL,
                               stdout=out, stderr=err)
    with open(spec["pidfile"], "w") as f:
        f.write(str(process.pid))
    code = process.wait()
    with open(spec["runs"], "a") as f:
        f.write(json.dumps({{"start": started, "end": time.time(), "status": code}}) + "\\n")
    time.sleep(max(0.0, spec["throttle"] - (time.time() - started)))
"""

def start(job, plist):
    if not (state["run"] and plist.get("RunAtLoad")):
        return
    env = dict(plist.get("EnvironmentVariables", {{}}))
    env.setdefault("HOME", os.environ.get("HOME", ""))
    env.update(state["extra_env"])
    out = open(plist["StandardOutPath"], "ab")
    err = open(plist["StandardErrorPath"], "ab")
    if state["keepalive"] and plist.get("KeepAlive"):
        label = plist["Label"]
        job["pidfile"] = os.path.join(home, label + ".pid")
        spec = {{"argv": plist["ProgramArguments"], "cwd": plist.get("WorkingDirectory"), "env": env,
                "out": plist["StandardOutPath"], "err": plist["StandardErrorPath"], "pidfile": job["pidfile"],
                "runs": os.path.join(home, label + ".runs"), "throttle": plist.get("ThrottleInterval", 10)}}
        process = subprocess.Popen([sys.executable, "-c", SUPERVISOR, json.dumps(spec)], stdin=subprocess.DEVNULL,
                                   stdout=out, stderr=err, start_new_session=True)
    else:
        process = subprocess.Popen(plist["ProgramArguments"], cwd=plist.get("WorkingDirectory"), env=env,
                                   stdin=subprocess.DEVNULL, stdout=out, stderr=err, start_new_session=True)
    job["pid"] = process.pid
    state["pids"].append(process.pid)

command = sys.argv[1]
if command == "bootstrap":
    domain, plist_path = sys.argv[2], sys.argv[3]
    try:
        with open(plist_path, "rb") as f:
            plist = plistlib.load(f)
    except Exception:
        fail(5, "Bootstrap failed: 5: Input/output error")
    target = domain + "/" + plist["Label"]
    if state["busy"] > 0:
        state["busy"] -= 1
        text = {{5: "Input/output error", 37: "Operation already in progress", 119: "Service is disabled"}}.get(
            state["busy_code"], "Error")
        fail(state["busy_code"], "Bootstrap failed: %d: %s" % (state["busy_code"], text))
    if state["leaving"].get(target, 0) > 0 or target in state["jobs"] or target in state["disabled"]:
        fail(5, "Bootstrap failed: 5: Input/output error")
    job = {{"plist": plist_path, "mode": oct(os.stat(plist_path).st_mode & 0o777)}}
    start(job, plist)
    state["jobs"][target] = job
elif command == "bootout":
    target = sys.argv[2]
    job = state["jobs"].pop(target, None)
    if job is None:
        fail(3, "Boot-out failed: 3: No such process")
    stop(job)
    state["leaving"][target] = state["linger"]
elif command == "print":
    target = sys.argv[2]
    if state["leaving"].get(target, 0) > 0:
        state["leaving"][target] -= 1
        save()
        print(target + " = {{\n\tstate = not running\n}}")
        sys.exit(0)
    job = state["jobs"].get(target)
    if job is None:
        fail(113, 'Could not find service "%s" in domain for user gui: %d' % (target.rsplit("/", 1)[-1], os.getuid()))
    pid = job.get("pid", 4242)
    if job.get("pidfile") and os.path.exists(job["pidfile"]):
        with open(job["pidfile"]) as f:
            pid = int(f.read() or pid)  # the program the supervisor runs now, as launchd reports it
    print(target + " = {{\n\tstate = running\n\tpid = %d\n\tlast exit code = 0\n}}" % pid)
elif command == "kickstart":
    target = sys.argv[-1]
    if target not in state["jobs"]:
        fail(113, "Could not find service")
    job = state["jobs"][target]
    if "-k" in sys.argv and job.get("pid"):
        stop(job)
        wait_gone(job["pid"])  # as launchd does: the new process starts once the old one has exited
        with open(job["plist"], "rb") as f:
            start(job, plistlib.load(f))
elif command == "enable":
    target = sys.argv[2]
    if target in state["disabled"] and not state["background_off"]:
        state["disabled"].remove(target)
elif command == "disable":
    state["disabled"].append(sys.argv[2])
elif command == "print-disabled":
    # As macOS 13+ prints it: every label of the domain that has an override, enabled or disabled.
    domain = sys.argv[2]
    print("disabled services = {{")
    print('\t"com.apple.ScreenReaderUIServer" => disabled')
    for target in state["disabled"]:
        if target.startswith(domain + "/"):
            print('\t"%s" => disabled' % target[len(domain) + 1:])
    for target in state["jobs"]:
        if target not in state["disabled"]:
            print('\t"%s" => enabled' % target.rsplit("/", 1)[-1])
    print("}}")
save()
'''


class FakeLaunchctl:
    def __init__(self, folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.home = folder / "launchctl-state"
        self.home.mkdir(parents=True)
        bin_dir = folder / "launchctl-bin"
        bin_dir.mkdir()
        fake = bin_dir / "launchctl"
        fake.write_text(SCRIPT.format(python=sys.executable))
        fake.chmod(0o755)
        self._state: dict[str, Any] = {
            "jobs": {}, "leaving": {}, "linger": 0, "busy": 0, "busy_code": 5, "run": False, "pids": [],
            "disabled": [], "background_off": False, "keepalive": False, "extra_env": {},
        }
        self._save()
        monkeypatch.setenv("FAKE_LAUNCHCTL_HOME", str(self.home))
        monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")

    def _save(self) -> None:
        (self.home / "state.json").write_text(json.dumps(self._state))

    def _load(self) -> dict[str, Any]:
        state: dict[str, Any] = json.loads((self.home / "state.json").read_text())
        return state

    def configure(self, *, linger: int | None = None, busy: int | None = None, busy_code: int | None = None,
                  run: bool | None = None, disabled: list[str] | None = None,
                  background_off: bool | None = None, keepalive: bool | None = None,
                  extra_env: dict[str, str] | None = None) -> None:
        """``keepalive``: restart a KeepAlive job's program when it exits (see SUPERVISOR); ``extra_env``: added to
        the environment of the programs it starts (a test's stand-ins, e.g. tests/support/tcc_site)."""
        state = self._load()
        for key, value in (("linger", linger), ("busy", busy), ("busy_code", busy_code), ("run", run),
                           ("disabled", disabled), ("background_off", background_off), ("keepalive", keepalive),
                           ("extra_env", extra_env)):
            if value is not None:
                state[key] = value
        self._state = state
        self._save()

    def calls(self) -> list[str]:
        log = self.home / "calls.log"
        return log.read_text().splitlines() if log.exists() else []

    def verbs(self) -> list[str]:
        return [call.split()[0] for call in self.calls()]

    def clear_calls(self) -> None:
        (self.home / "calls.log").unlink(missing_ok=True)

    def jobs(self) -> dict[str, dict[str, Any]]:
        jobs: dict[str, dict[str, Any]] = self._load()["jobs"]
        return jobs

    def switch_off(self, target: str) -> None:
        """The owner switches Apple Flow off under Login Items: the job leaves the domain and stays disabled."""
        state = self._load()
        job = state["jobs"].pop(target, None)
        if job and job.get("pid"):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(job["pid"], signal.SIGTERM)
        state["disabled"].append(target)
        state["background_off"] = True
        self._state = state
        self._save()

    def runs(self, label: str) -> list[dict[str, Any]]:
        """With keepalive: each run of the job's program that ended (start, end, status)."""
        path = self.home / f"{label}.runs"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def kill_all(self) -> None:
        """Stops every process a bootstrap started (test teardown)."""
        for pid in self._load()["pids"]:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
