"""The daemon's durable state: one SQLite database (WAL) holding the ingress cursor, every handled message, the
files its replies send, the per-sender conversation history, runs, approvals and events.

The schema is versioned with ``PRAGMA user_version``; ``MIGRATIONS[i]`` takes a database from version ``i`` to
``i + 1``. One connection is shared by the daemon's threads behind a re-entrant lock; ``transaction()`` groups
writes so that, for example, a reply, the files it sends and the approval it announces are recorded together or not
at all.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from apple_flow.connectors.base import Exchange, TurnOutcome

MIGRATIONS: tuple[str, ...] = (
    # 1: the initial schema.
    """
    CREATE TABLE cursor (
        channel TEXT PRIMARY KEY,
        last_rowid INTEGER NOT NULL
    );
    CREATE TABLE messages (
        channel TEXT NOT NULL,
        rowid INTEGER NOT NULL,
        sender TEXT NOT NULL,
        text TEXT NOT NULL,
        state TEXT NOT NULL,          -- taken | replied | sent | ignored | send_failed
        reply TEXT,
        note TEXT,
        received_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        PRIMARY KEY (channel, rowid)
    );
    CREATE TABLE history (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        thread TEXT NOT NULL,
        user TEXT NOT NULL,
        assistant TEXT NOT NULL,
        at REAL NOT NULL
    );
    CREATE INDEX history_by_thread ON history (thread, id);
    CREATE TABLE runs (
        id TEXT PRIMARY KEY,
        sender TEXT NOT NULL,
        kind TEXT NOT NULL,           -- chat | idea | plan | task | execute
        workspace TEXT NOT NULL,
        request TEXT NOT NULL,
        state TEXT NOT NULL,          -- running | done | failed | blocked | cancelled | interrupted
        result TEXT,
        started_at REAL NOT NULL,
        finished_at REAL
    );
    CREATE INDEX runs_by_sender ON runs (sender, started_at);
    CREATE TABLE approvals (
        id TEXT PRIMARY KEY,
        sender TEXT NOT NULL,
        task TEXT NOT NULL,
        plan TEXT NOT NULL,
        workspace TEXT NOT NULL,
        state TEXT NOT NULL,          -- pending | approved | denied
        created_at REAL NOT NULL,
        expires_at REAL NOT NULL,
        decided_at REAL,
        decided_by TEXT,              -- the message that decided it ("channel:rowid"), to replay it after a crash
        extra TEXT
    );
    CREATE INDEX approvals_by_sender ON approvals (sender, state);
    CREATE TABLE events (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        at REAL NOT NULL,
        kind TEXT NOT NULL,
        sender TEXT,
        detail TEXT NOT NULL
    );
    """,
    # 2: small facts about the daemon itself (e.g. the token its children carry, to find them after a kill -9).
    """
    CREATE TABLE meta (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL
    );
    """,
    # 3: what the daemon sent lately (replies and progress, as the channel noted each part), so that the echoes of
    # its own texts (a person texting themselves) are recognised, also after a restart.
    """
    CREATE TABLE sent (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        channel TEXT NOT NULL,
        recipient TEXT NOT NULL,
        text TEXT NOT NULL,
        at REAL NOT NULL
    );
    CREATE INDEX sent_by_time ON sent (channel, at);
    """,
    # 4: what each run did, for the web page: the agent's stream-json events (size-bounded, see run_log.py), and the
    # message a run answers ("channel:rowid"), whose reply is the one sent.
    """
    CREATE TABLE run_events (
        run_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        at REAL NOT NULL,
        type TEXT NOT NULL,
        body TEXT NOT NULL,           -- the event's JSON, cut to EVENT_MAX_BYTES
        PRIMARY KEY (run_id, seq)
    );
    ALTER TABLE runs ADD COLUMN message TEXT;
    ALTER TABLE runs ADD COLUMN events_dropped INTEGER NOT NULL DEFAULT 0;
    CREATE INDEX runs_by_time ON runs (started_at);
    """,
    # 5: how each run ended, as its connector reported it (the typed outcome): for status, usage and the web page.
    """
    ALTER TABLE runs ADD COLUMN outcome TEXT;          -- answered | empty | timed_out | no_model | ... (Status)
    ALTER TABLE runs ADD COLUMN files_changed TEXT;    -- JSON list of paths
    ALTER TABLE runs ADD COLUMN commands_run INTEGER;
    ALTER TABLE runs ADD COLUMN input_tokens INTEGER;
    ALTER TABLE runs ADD COLUMN output_tokens INTEGER;
    """,
    # 6: a sent text can come back twice (the sent copy and the received one, texting yourself): which of them
    # came back already ('' none, 'sent' or 'received'); the entry goes once both have.
    """
    ALTER TABLE sent ADD COLUMN seen TEXT NOT NULL DEFAULT '';
    """,
    # 7: a task approved on the web page has no message that a restart handles again: its run is kept here from the
    # approval on ('queued'), its answer recorded before it is sent ('replied'), then 'sent'; a restart redoes what
    # is missing, as it does for a message.
    """
    CREATE TABLE web_runs (
        approval_id TEXT PRIMARY KEY,
        state TEXT NOT NULL,          -- queued | replied | sent
        reply TEXT,
        updated_at REAL NOT NULL
    );
    """,
    # 8: what the iMessage ingress decided about the rows it took or skipped as copies (a guid seen before, the other
    # copy of a text to yourself), so that a copy arriving after a restart is not run again (echo.Copies).
    """
    CREATE TABLE copies (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        channel TEXT NOT NULL,
        rowid INTEGER NOT NULL,
        guid TEXT NOT NULL,           -- '' when the row has none
        own_chat TEXT NOT NULL,       -- the owner's address when texting yourself, else ''
        text TEXT NOT NULL,           -- normalised
        from_me INTEGER NOT NULL,
        at REAL NOT NULL,
        copy_of INTEGER,              -- the row it is a copy of; NULL: it was taken
        paired INTEGER NOT NULL DEFAULT 0
    );
    CREATE UNIQUE INDEX copies_by_row ON copies (channel, rowid);
    CREATE INDEX copies_by_guid ON copies (channel, guid);
    CREATE INDEX copies_by_text ON copies (channel, own_chat, text);
    """,
    # 9: for `usage`: what answered each run (the connector, and the backend and model the agent reported), and
    # whether its token counts were estimated rather than counted by the model.
    """
    ALTER TABLE runs ADD COLUMN backend TEXT;           -- e.g. "afm:openai (qwen2.5:3b)", "gemini-cli"
    ALTER TABLE runs ADD COLUMN tokens_estimated INTEGER;
    """,
    # 10: the files a reply names (outbox.py), recorded with the reply in its transaction and marked as each is sent
    # or refused, so that a restart sends what a crash left unsent, after the reply, each once.
    """
    CREATE TABLE reply_files (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        reply_of TEXT NOT NULL,       -- whose reply: "message:<channel>:<rowid>" or "web:<approval id>"
        recipient TEXT NOT NULL,      -- where it goes (the reply's recipient)
        sender TEXT NOT NULL,         -- whose request it answers (for events)
        workspace TEXT NOT NULL,      -- the turn's workspace, to check the file against again before it goes
        shown TEXT NOT NULL,          -- the name the reply shows
        path TEXT NOT NULL,           -- the file as checked when the reply was recorded (resolved)
        state TEXT NOT NULL,          -- pending | sent | not_sent
        problem TEXT,                 -- why it was not sent
        updated_at REAL NOT NULL
    );
    CREATE INDEX reply_files_by_reply ON reply_files (reply_of, state);
    """,
)
SCHEMA_VERSION = len(MIGRATIONS)
HISTORY_KEEP = 50  # exchanges kept per thread; connectors inject far fewer
COPIES_KEEP = 10_000  # rows whose copy decision is kept per channel (a re-inserted row comes back within days)


class StoreError(RuntimeError):
    """The database cannot be used; the message says which file and what to do."""


@dataclass(frozen=True)
class MessageRecord:
    channel: str
    rowid: int
    sender: str
    text: str
    state: str
    reply: str | None
    note: str | None


@dataclass(frozen=True)
class FailedSend:
    """A reply that did not go out (state ``send_failed``)."""

    sender: str
    request: str  # the message it answered
    reason: str
    at: float


@dataclass(frozen=True)
class Run:
    id: str
    sender: str
    kind: str
    workspace: str
    request: str
    state: str
    result: str | None
    started_at: float
    finished_at: float | None
    message: str | None = None  # "channel:rowid" of the message the run answers
    events_dropped: int = 0  # events not kept once the run's share of the store was used up
    outcome: str | None = None  # how the agent's turn ended (a connectors.base.Status value)
    files_changed: str | None = None  # JSON list, as the agent reported
    commands_run: int | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    backend: str | None = None  # what answered: the connector, with the backend and model the agent reported
    tokens_estimated: int | None = None  # 1: the token counts are the agent's estimate, not the model's count


@dataclass(frozen=True)
class FinishedTurn:
    """A turn that has run: what to send and what to record of it, written together by ``record_turn``."""

    reply: str | None  # None: send nothing (the turn was cancelled and the sender already told)
    run_state: str  # done | failed | blocked | cancelled
    run_result: str  # what the run row keeps: the agent's text, or the failure
    outcome: TurnOutcome | None = None  # the connector's, when it gave one
    exchange: Exchange | None = None  # the conversation's new exchange, to keep
    approval: Approval | None = None  # a new request the reply announces
    files: tuple[str, ...] = ()  # workspace files the answer asks to send with the reply (daemon/outbox.py)
    backend: str | None = None  # what answered (see ``Run.backend``)


@dataclass(frozen=True)
class ReplyFile:
    """A file a reply names, not sent yet (``Store.unsent_reply_files``)."""

    id: int
    recipient: str
    sender: str
    workspace: str
    shown: str
    path: str


def message_reply(channel: str, rowid: int) -> str:
    """The ``reply_of`` of a message's reply."""
    return f"message:{channel}:{rowid}"


WEB_REPLY_PREFIX = "web:"


def web_reply(approval_id: str) -> str:
    """The ``reply_of`` of the reply to a task approved on the web page."""
    return f"{WEB_REPLY_PREFIX}{approval_id}"


@dataclass(frozen=True)
class RunEvent:
    seq: int
    at: float
    type: str
    body: str  # JSON


@dataclass(frozen=True)
class Approval:
    id: str
    sender: str
    task: str
    plan: str
    workspace: str
    state: str
    created_at: float
    expires_at: float
    decided_at: float | None
    decided_by: str | None
    extra: str | None


@dataclass(frozen=True)
class Event:
    at: float
    kind: str
    sender: str | None
    detail: str


class Store:
    def __init__(self, path: Path, clock: Callable[[], float] = time.time) -> None:
        self.path = path
        self._clock = clock
        self._lock = threading.RLock()
        self._depth = 0
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False, timeout=10)
            self._db.row_factory = sqlite3.Row
            self._db.execute("PRAGMA journal_mode=WAL")
            # NORMAL is durable against a killed process (the WAL is in the OS cache); only power loss could
            # drop the newest transactions.
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA foreign_keys=ON")
            # SQLite's lower() knows ASCII only; searches compare Python-casefolded text (accents, CJK, emoji).
            self._db.create_function("casefolded", 1, _casefolded, deterministic=True)
            self._migrate()
        except sqlite3.DatabaseError as exc:
            raise StoreError(
                f"Cannot use the daemon database {path}: {exc}. If it is not an apple-flow database, move it "
                "away or set APPLE_FLOW_DB_PATH to another file."
            ) from exc
        except OSError as exc:
            raise StoreError(f"Cannot create the daemon database {path}: {exc.strerror}. Check the folder.") from exc

    # ------------------------------------------------------------------------------------------- plumbing

    def _migrate(self) -> None:
        version = int(self._db.execute("PRAGMA user_version").fetchone()[0])
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"The daemon database {self.path} has schema version {version}, newer than this apple-flow "
                f"understands ({SCHEMA_VERSION}). Upgrade apple-flow or use another APPLE_FLOW_DB_PATH."
            )
        for index in range(version, SCHEMA_VERSION):
            with self.transaction():
                for statement in _statements(MIGRATIONS[index]):
                    self._db.execute(statement)
                self._db.execute(f"PRAGMA user_version = {index + 1}")

    def now(self) -> float:
        """The store's clock (what it stamps rows with)."""
        return self._clock()

    @property
    def schema_version(self) -> int:
        with self._lock:
            return int(self._db.execute("PRAGMA user_version").fetchone()[0])

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """All writes inside happen together or not at all. Nests (inner blocks join the outer one)."""
        with self._lock:
            if self._depth:
                self._depth += 1
                try:
                    yield
                finally:
                    self._depth -= 1
                return
            self._db.execute("BEGIN IMMEDIATE")
            self._depth = 1
            try:
                yield
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            else:
                self._db.execute("COMMIT")
            finally:
                self._depth = 0

    def _write(self, sql: str, args: tuple[Any, ...] = ()) -> sqlite3.Cursor:
        with self.transaction():
            return self._db.execute(sql, args)

    def _rows(self, sql: str, args: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
        with self._lock:
            return list(self._db.execute(sql, args).fetchall())

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # ------------------------------------------------------------------------------------------- meta

    def meta(self, key: str) -> str | None:
        rows = self._rows("SELECT value FROM meta WHERE key = ?", (key,))
        return str(rows[0][0]) if rows else None

    def set_meta(self, key: str, value: str) -> None:
        self._write(
            "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    # ------------------------------------------------------------------------------------------- cursor

    def cursor(self, channel: str) -> int | None:
        rows = self._rows("SELECT last_rowid FROM cursor WHERE channel = ?", (channel,))
        return int(rows[0][0]) if rows else None

    def advance_cursor(self, channel: str, rowid: int) -> None:
        """Moves the cursor forward to ``rowid``; never back (callers on several threads may save out of order)."""
        self._write(
            "INSERT INTO cursor (channel, last_rowid) VALUES (?, ?) "
            "ON CONFLICT (channel) DO UPDATE SET last_rowid = MAX(last_rowid, excluded.last_rowid)",
            (channel, rowid),
        )

    def set_cursor(self, channel: str, rowid: int) -> None:
        self._write(
            "INSERT INTO cursor (channel, last_rowid) VALUES (?, ?) "
            "ON CONFLICT (channel) DO UPDATE SET last_rowid = excluded.last_rowid",
            (channel, rowid),
        )

    # ------------------------------------------------------------------------------------------- messages

    def message(self, channel: str, rowid: int) -> MessageRecord | None:
        rows = self._rows(
            "SELECT channel, rowid, sender, text, state, reply, note FROM messages WHERE channel = ? AND rowid = ?",
            (channel, rowid),
        )
        return MessageRecord(*rows[0]) if rows else None

    def _put_message(self, channel: str, rowid: int, sender: str, text: str, state: str, note: str | None) -> None:
        now = self._clock()
        self._write(
            "INSERT INTO messages (channel, rowid, sender, text, state, note, received_at, updated_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (channel, rowid) DO UPDATE SET "
            "state = excluded.state, note = excluded.note, updated_at = excluded.updated_at",
            (channel, rowid, sender, text, state, note, now, now),
        )

    def take(self, channel: str, rowid: int, sender: str, text: str) -> None:
        """Records that the message is being handled (before any turn for it runs)."""
        self._put_message(channel, rowid, sender, text, "taken", None)

    def ignore(self, channel: str, rowid: int, sender: str, text: str, reason: str) -> None:
        self._put_message(channel, rowid, sender, text, "ignored", reason)

    def record_reply(self, channel: str, rowid: int, reply: str | None, note: str | None = None) -> None:
        """Stores the final reply before it is sent. ``None``: nothing is to be sent (e.g. cancelled)."""
        state = "replied" if reply is not None else "sent"
        self._write(
            "UPDATE messages SET state = ?, reply = ?, note = ?, updated_at = ? WHERE channel = ? AND rowid = ?",
            (state, reply, note, self._clock(), channel, rowid),
        )

    def mark_sent(self, channel: str, rowid: int, failed: str | None = None) -> None:
        self._write(
            "UPDATE messages SET state = ?, note = COALESCE(?, note), updated_at = ? WHERE channel = ? AND rowid = ?",
            ("send_failed" if failed else "sent", failed, self._clock(), channel, rowid),
        )

    def count_messages(self, state: str | None = None) -> int:
        if state is None:
            return int(self._rows("SELECT COUNT(*) FROM messages")[0][0])
        return int(self._rows("SELECT COUNT(*) FROM messages WHERE state = ?", (state,))[0][0])

    def failed_sends(self, since: float, sender: str | None = None) -> tuple[int, FailedSend | None]:
        """How many replies failed to go out since ``since`` (of ``sender``, or anyone's), and the latest."""
        where = "state = 'send_failed' AND updated_at >= ?" + (" AND sender = ?" if sender is not None else "")
        args: tuple[Any, ...] = (since,) if sender is None else (since, sender)
        count = int(self._rows(f"SELECT COUNT(*) FROM messages WHERE {where}", args)[0][0])
        rows = self._rows(
            f"SELECT sender, text, note, updated_at FROM messages WHERE {where} ORDER BY updated_at DESC LIMIT 1", args
        )
        latest = FailedSend(rows[0][0], rows[0][1], rows[0][2] or "", rows[0][3]) if rows else None
        return count, latest

    # ------------------------------------------------------------------------------------------- reply files

    def record_reply_files(
        self, reply_of: str, recipient: str, sender: str, workspace: str, files: Sequence[tuple[str, str]]
    ) -> None:
        """Records the files (shown name, path) a reply names, to send after it; called in the transaction that
        records the reply."""
        now = self._clock()
        with self.transaction():
            for shown, path in files:
                self._db.execute(
                    "INSERT INTO reply_files (reply_of, recipient, sender, workspace, shown, path, state, updated_at) "
                    "VALUES (?, ?, ?, ?, ?, ?, 'pending', ?)",
                    (reply_of, recipient, sender, workspace, shown, path, now),
                )

    def unsent_reply_files(self, reply_of: str) -> list[ReplyFile]:
        """The files of a reply neither sent nor refused yet, in the order the reply names them."""
        rows = self._rows(
            "SELECT id, recipient, sender, workspace, shown, path FROM reply_files "
            "WHERE reply_of = ? AND state = 'pending' ORDER BY id",
            (reply_of,),
        )
        return [ReplyFile(*row) for row in rows]

    def replies_with_unsent_files(self, prefix: str) -> list[str]:
        """The ``reply_of`` of replies (those starting with ``prefix``) with files still to send, oldest first."""
        rows = self._rows(
            "SELECT reply_of FROM reply_files WHERE state = 'pending' AND substr(reply_of, 1, ?) = ? "
            "GROUP BY reply_of ORDER BY MIN(id)",
            (len(prefix), prefix),
        )
        return [str(row[0]) for row in rows]

    def reply_file_done(self, file_id: int, problem: str | None = None) -> None:
        """The file went (``problem`` None), or will not (why)."""
        self._write(
            "UPDATE reply_files SET state = ?, problem = ?, updated_at = ? WHERE id = ?",
            ("not_sent" if problem is not None else "sent", problem, self._clock(), file_id),
        )

    # ------------------------------------------------------------------------------------------- sent texts

    def record_sent(self, channel: str, recipient: str, text: str, keep_seconds: float) -> None:
        """Records a text about to be sent; entries older than ``keep_seconds`` go (the table stays small)."""
        now = self._clock()
        with self.transaction():
            self._db.execute("DELETE FROM sent WHERE channel = ? AND at < ?", (channel, now - keep_seconds))
            self._db.execute(
                "INSERT INTO sent (channel, recipient, text, at) VALUES (?, ?, ?, ?)", (channel, recipient, text, now)
            )

    def take_sent(self, channel: str, recipient: str, text: str, since: float, from_me: bool = False) -> bool:
        """True when ``text`` was sent to ``recipient`` on ``channel`` at or after ``since`` and this copy of it
        (the sent one, ``from_me``, or the received one) has not come back yet; the oldest such entry notes it, and
        goes once both copies have. Writes only when there is one."""
        copy = "sent" if from_me else "received"
        rows = self._rows(
            "SELECT id, seen FROM sent WHERE channel = ? AND recipient = ? AND text = ? AND at >= ? AND seen != ? "
            "ORDER BY id LIMIT 1",
            (channel, recipient, text, since, copy),
        )
        if not rows:
            return False
        entry, seen = rows[0]
        if seen:
            self._write("DELETE FROM sent WHERE id = ?", (entry,))
        else:
            self._write("UPDATE sent SET seen = ? WHERE id = ?", (copy, entry))
        return True

    def sent_texts(self, channel: str, window_seconds: float) -> SentRecord:
        """The record of texts sent on ``channel`` that the channel uses (``channels.base.SentTexts``): entries
        count for ``window_seconds``, across restarts."""
        return SentRecord(self, channel, window_seconds)

    # ------------------------------------------------------------------------------------------- copies

    def copy_record(self, channel: str) -> CopyTable:
        """The record of what the ingress of ``channel`` took (``channels.imessage.echo.CopyRecord``)."""
        return CopyTable(self, channel)

    def copy_verdict(self, channel: str, rowid: int) -> tuple[bool, int | None]:
        """(whether the row was decided before, the row it was a copy of: None when it was taken)."""
        rows = self._rows("SELECT copy_of FROM copies WHERE channel = ? AND rowid = ?", (channel, rowid))
        return (False, None) if not rows else (True, None if rows[0][0] is None else int(rows[0][0]))

    def copy_with_guid(self, channel: str, guid: str) -> int | None:
        """The row first taken with ``guid``."""
        rows = self._rows(
            "SELECT COALESCE(copy_of, rowid) FROM copies WHERE channel = ? AND guid = ? ORDER BY id LIMIT 1",
            (channel, guid),
        )
        return int(rows[0][0]) if rows else None

    def take_copy_pair(self, channel: str, own_chat: str, text: str, from_me: bool, since: float) -> int | None:
        """A taken, unpaired row of the other kind (sent vs received) with the same words in ``own_chat``, recorded at
        or after ``since``: marked paired, its rowid returned."""
        with self.transaction():
            rows = self._db.execute(
                "SELECT id, rowid FROM copies WHERE channel = ? AND own_chat = ? AND text = ? AND from_me != ? "
                "AND at >= ? AND copy_of IS NULL AND paired = 0 ORDER BY id LIMIT 1",
                (channel, own_chat, text, int(from_me), since),
            ).fetchall()
            if not rows:
                return None
            self._db.execute("UPDATE copies SET paired = 1 WHERE id = ?", (rows[0][0],))
            return int(rows[0][1])

    def add_copy(
        self, channel: str, rowid: int, guid: str, own_chat: str, text: str, from_me: bool, at: float,
        copy_of: int | None,
    ) -> None:
        """Records what was decided about a row; about the newest ``COPIES_KEEP`` of a channel are kept (trimmed
        every 100 rows, not at each)."""
        with self.transaction():
            added = self._db.execute(
                "INSERT OR REPLACE INTO copies (channel, rowid, guid, own_chat, text, from_me, at, copy_of) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (channel, rowid, guid, own_chat, text, int(from_me), at, copy_of),
            ).lastrowid
            if added is not None and added % 100 == 0:
                self._db.execute(
                    "DELETE FROM copies WHERE channel = ? AND id <= (SELECT MAX(id) FROM copies WHERE channel = ?) - ?",
                    (channel, channel, COPIES_KEEP),
                )

    # ------------------------------------------------------------------------------------------- history

    def history(self, thread_id: str, limit: int) -> list[Exchange]:
        if limit <= 0:
            return []
        rows = self._rows(
            "SELECT user, assistant FROM history WHERE thread = ? ORDER BY id DESC LIMIT ?", (thread_id, limit)
        )
        return [Exchange(user=row[0], assistant=row[1]) for row in reversed(rows)]

    def append(self, thread_id: str, exchange: Exchange) -> None:
        with self.transaction():
            self._db.execute(
                "INSERT INTO history (thread, user, assistant, at) VALUES (?, ?, ?, ?)",
                (thread_id, exchange.user, exchange.assistant, self._clock()),
            )
            self._db.execute(
                "DELETE FROM history WHERE thread = ? AND id NOT IN "
                "(SELECT id FROM history WHERE thread = ? ORDER BY id DESC LIMIT ?)",
                (thread_id, thread_id, HISTORY_KEEP),
            )

    def clear(self, thread_id: str) -> None:
        self._write("DELETE FROM history WHERE thread = ?", (thread_id,))

    # ------------------------------------------------------------------------------------------- runs

    def start_run(
        self, run_id: str, sender: str, kind: str, workspace: str, request: str, message: str | None = None
    ) -> None:
        self._write(
            "INSERT INTO runs (id, sender, kind, workspace, request, state, started_at, message) "
            "VALUES (?, ?, ?, ?, ?, 'running', ?, ?)",
            (run_id, sender, kind, workspace, request, self._clock(), message),
        )

    def finish_run(self, run_id: str, state: str, result: str) -> None:
        self._write(
            "UPDATE runs SET state = ?, result = ?, finished_at = ? WHERE id = ?",
            (state, result, self._clock(), run_id),
        )

    def record_turn(self, channel: str, rowid: int | None, sender: str, run_id: str, turn: FinishedTurn) -> None:
        """Records a finished turn in one transaction: the reply (before it is sent; ``rowid`` None: a turn no
        message asked for, a task approved on the web page), the run's end and outcome, the conversation's new
        exchange, and the request the reply announces. A crash leaves all or none."""
        outcome = turn.outcome
        usage = outcome.usage if outcome is not None else None
        with self.transaction():
            if rowid is not None:
                self.record_reply(channel, rowid, turn.reply, "cancelled" if turn.reply is None else None)
            self._db.execute(
                "UPDATE runs SET state = ?, result = ?, finished_at = ?, outcome = ?, files_changed = ?, "
                "commands_run = ?, input_tokens = ?, output_tokens = ?, backend = ?, tokens_estimated = ? "
                "WHERE id = ?",
                (
                    turn.run_state, turn.run_result, self._clock(),
                    outcome.status.value if outcome is not None else None,
                    json.dumps(list(outcome.files_changed)) if outcome is not None else None,
                    outcome.commands_run if outcome is not None else None,
                    usage.input_tokens if usage is not None else None,
                    usage.output_tokens if usage is not None else None,
                    turn.backend,
                    int(usage.estimated) if usage is not None else None,
                    run_id,
                ),
            )
            if turn.exchange is not None:
                self.append(sender, turn.exchange)
            if turn.approval is not None:
                self.add_approval(turn.approval)

    def run(self, run_id: str) -> Run | None:
        rows = self._rows("SELECT * FROM runs WHERE id = ?", (run_id,))
        return Run(**dict(rows[0])) if rows else None

    def runs_of(self, sender: str, limit: int = 5) -> list[Run]:
        rows = self._rows(
            "SELECT * FROM runs WHERE sender = ? ORDER BY started_at DESC, rowid DESC LIMIT ?", (sender, limit)
        )
        return [Run(**dict(row)) for row in rows]

    def search_runs(self, sender: str, query: str = "", limit: int = 5) -> list[Run]:
        """The sender's runs, newest first; with ``query``, only those whose request or result contains it (any
        case, any script: compared casefolded)."""
        needle = query.strip().casefold()
        where = "sender = ?" + (" AND instr(casefolded(request || char(10) || COALESCE(result, '')), ?) > 0"
                                if needle else "")
        args: tuple[Any, ...] = (sender, needle, limit) if needle else (sender, limit)
        rows = self._rows(f"SELECT * FROM runs WHERE {where} ORDER BY started_at DESC, rowid DESC LIMIT ?", args)
        return [Run(**dict(row)) for row in rows]

    def runs_since(self, sender: str, since: float) -> list[Run]:
        """The sender's runs started at or after ``since``, oldest first."""
        rows = self._rows(
            "SELECT * FROM runs WHERE sender = ? AND started_at >= ? ORDER BY started_at, rowid", (sender, since)
        )
        return [Run(**dict(row)) for row in rows]

    def recent_runs(self, limit: int = 50) -> list[Run]:
        """Every sender's runs, newest first."""
        rows = self._rows("SELECT * FROM runs ORDER BY started_at DESC, rowid DESC LIMIT ?", (limit,))
        return [Run(**dict(row)) for row in rows]

    def add_run_event(self, run_id: str, event_type: str, body: str, budget: int, keep_runs: int) -> bool:
        """Keeps one event of a run unless the run's events already take ``budget`` bytes (then it is counted as
        dropped). The first event of a run also forgets the events of runs older than the newest ``keep_runs``,
        so the table stays bounded. Returns whether the event was kept."""
        with self.transaction():
            used, count = self._db.execute(
                "SELECT COALESCE(SUM(LENGTH(body)), 0), COUNT(*) FROM run_events WHERE run_id = ?", (run_id,)
            ).fetchone()
            if count == 0:
                self._db.execute(
                    "DELETE FROM run_events WHERE run_id IN (SELECT id FROM runs ORDER BY started_at DESC, "
                    "rowid DESC LIMIT -1 OFFSET ?)",
                    (keep_runs,),
                )
            if used + len(body) > budget:
                self._db.execute("UPDATE runs SET events_dropped = events_dropped + 1 WHERE id = ?", (run_id,))
                return False
            self._db.execute(
                "INSERT INTO run_events (run_id, seq, at, type, body) VALUES (?, ?, ?, ?, ?)",
                (run_id, count + 1, self._clock(), event_type, body),
            )
            return True

    def run_facts(self, run_ids: list[str]) -> dict[str, dict[str, dict[str, Any]]]:
        """The ``start`` and ``result`` events of these runs, decoded: {run_id: {"start": {...}, "result": {...}}}
        (the figures a list of runs shows: backend, model, tokens)."""
        found: dict[str, dict[str, dict[str, Any]]] = {}
        for chunk in range(0, len(run_ids), 500):
            ids = run_ids[chunk : chunk + 500]
            marks = ",".join("?" * len(ids))
            rows = self._rows(
                f"SELECT run_id, type, body FROM run_events WHERE run_id IN ({marks}) AND type IN ('start', 'result')",
                tuple(ids),
            )
            for run_id, event_type, body in rows:
                try:
                    event = json.loads(body)
                except ValueError:
                    continue
                if isinstance(event, dict):
                    found.setdefault(str(run_id), {})[str(event_type)] = event
        return found

    def run_events(self, run_id: str) -> list[RunEvent]:
        rows = self._rows("SELECT seq, at, type, body FROM run_events WHERE run_id = ? ORDER BY seq", (run_id,))
        return [RunEvent(*row) for row in rows]

    def interrupt_running_runs(self) -> int:
        """At start-up: runs still 'running' were cut short by a crash or kill."""
        cursor = self._write(
            "UPDATE runs SET state = 'interrupted', finished_at = ?, result = 'interrupted by a daemon restart' "
            "WHERE state = 'running'",
            (self._clock(),),
        )
        return cursor.rowcount

    # ------------------------------------------------------------------------------------------- approvals

    def add_approval(self, approval: Approval) -> None:
        self._write(
            "INSERT INTO approvals (id, sender, task, plan, workspace, state, created_at, expires_at, decided_at, "
            "decided_by, extra) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                approval.id, approval.sender, approval.task, approval.plan, approval.workspace, approval.state,
                approval.created_at, approval.expires_at, approval.decided_at, approval.decided_by, approval.extra,
            ),
        )

    def approval(self, approval_id: str) -> Approval | None:
        rows = self._rows("SELECT * FROM approvals WHERE id = ?", (approval_id,))
        return Approval(**dict(rows[0])) if rows else None

    def approvals_decided_by(self, sender: str, decided_by: str) -> list[Approval]:
        """The sender's requests that the message ``decided_by`` ("channel:rowid") decided."""
        rows = self._rows(
            "SELECT * FROM approvals WHERE sender = ? AND decided_by = ? ORDER BY created_at", (sender, decided_by)
        )
        return [Approval(**dict(row)) for row in rows]

    def all_pending_approvals(self) -> list[Approval]:
        """Every sender's pending requests (expired ones too: the caller compares with its clock)."""
        rows = self._rows("SELECT * FROM approvals WHERE state = 'pending' ORDER BY created_at")
        return [Approval(**dict(row)) for row in rows]

    def pending_approvals(self, sender: str) -> list[Approval]:
        rows = self._rows(
            "SELECT * FROM approvals WHERE sender = ? AND state = 'pending' ORDER BY created_at", (sender,)
        )
        return [Approval(**dict(row)) for row in rows]

    def decide_approvals(self, decided: Sequence[Approval]) -> bool:
        """Records decisions (requests in their new state) on pending requests, all or none: False, and nothing
        written, when one of them was decided already (e.g. by a click on the web page a moment before)."""
        with self.transaction():  # BEGIN IMMEDIATE: nobody writes between the check and the updates
            for approval in decided:
                rows = self._db.execute("SELECT state FROM approvals WHERE id = ?", (approval.id,)).fetchall()
                if not rows or rows[0][0] != "pending":
                    return False
            for approval in decided:
                self._db.execute(
                    "UPDATE approvals SET state = ?, decided_at = ?, decided_by = ?, extra = ? WHERE id = ?",
                    (approval.state, approval.decided_at, approval.decided_by, approval.extra, approval.id),
                )
            return True

    def decide_approval(self, approval_id: str, state: str, decided_by: str, extra: str | None = None) -> bool:
        """Decides a pending request; False (and nothing written) when it was decided already, e.g. by a click on
        the web page a moment before the message."""
        cursor = self._write(
            "UPDATE approvals SET state = ?, decided_at = ?, decided_by = ?, extra = ? "
            "WHERE id = ? AND state = 'pending'",
            (state, self._clock(), decided_by, extra, approval_id),
        )
        return cursor.rowcount == 1

    def reopen_approval(self, approval_id: str) -> None:
        """An approval whose message was unsent before its task ran is pending again."""
        self._write(
            "UPDATE approvals SET state = 'pending', decided_at = NULL, decided_by = NULL, extra = NULL "
            "WHERE id = ? AND state = 'approved'",
            (approval_id,),
        )

    # ------------------------------------------------------------------------------------------- web approvals

    def queue_web_run(self, approval_id: str) -> None:
        """A request approved on the web page is to run (recorded with the decision, in its transaction)."""
        self._write(
            "INSERT INTO web_runs (approval_id, state, updated_at) VALUES (?, 'queued', ?) "
            "ON CONFLICT (approval_id) DO UPDATE SET state = 'queued', reply = NULL, updated_at = excluded.updated_at",
            (approval_id, self._clock()),
        )

    def record_web_reply(self, approval_id: str, reply: str | None) -> None:
        """Its run's answer, before it is sent (``None``: nothing to send, e.g. cancelled)."""
        self._write(
            "UPDATE web_runs SET state = ?, reply = ?, updated_at = ? WHERE approval_id = ?",
            ("replied" if reply is not None else "sent", reply, self._clock(), approval_id),
        )

    def web_reply_sent(self, approval_id: str) -> None:
        self._write(
            "UPDATE web_runs SET state = 'sent', updated_at = ? WHERE approval_id = ?", (self._clock(), approval_id)
        )

    def unfinished_web_runs(self) -> list[tuple[Approval, str | None]]:
        """At start-up: requests approved on the web page whose run did not finish (reply None: run it again) or
        whose answer was recorded but not sent (the reply), oldest first."""
        rows = self._rows(
            "SELECT a.*, w.state AS web_state, w.reply AS web_reply FROM web_runs w "
            "JOIN approvals a ON a.id = w.approval_id WHERE w.state != 'sent' ORDER BY w.updated_at, a.created_at"
        )
        found = []
        for row in rows:
            fields = dict(row)
            state, reply = fields.pop("web_state"), fields.pop("web_reply")
            found.append((Approval(**fields), reply if state == "replied" else None))
        return found

    # ------------------------------------------------------------------------------------------- events

    def log_event(self, kind: str, detail: str, sender: str | None = None) -> None:
        self._write(
            "INSERT INTO events (at, kind, sender, detail) VALUES (?, ?, ?, ?)", (self._clock(), kind, sender, detail)
        )

    def count_events(self, kind: str) -> int:
        return int(self._rows("SELECT COUNT(*) FROM events WHERE kind = ?", (kind,))[0][0])

    def events(self, limit: int = 50, kind: str | None = None) -> list[Event]:
        if kind is None:
            rows = self._rows("SELECT at, kind, sender, detail FROM events ORDER BY id DESC LIMIT ?", (limit,))
        else:
            rows = self._rows(
                "SELECT at, kind, sender, detail FROM events WHERE kind = ? ORDER BY id DESC LIMIT ?", (kind, limit)
            )
        return [Event(*row) for row in reversed(rows)]


class SentRecord:
    """``Store.sent_texts``: one channel's view of the record of sent texts (``channels.base.SentTexts``)."""

    def __init__(self, store: Store, channel: str, window_seconds: float) -> None:
        self._store = store
        self._channel = channel
        self._window = window_seconds

    def record(self, recipient: str, text: str) -> None:
        self._store.record_sent(self._channel, recipient, text, self._window)

    def take_echo(self, sender: str, text: str, from_me: bool = False) -> bool:
        since = self._store.now() - self._window
        return self._store.take_sent(self._channel, sender, text, since, from_me)


def _casefolded(value: str | None) -> str | None:
    return value.casefold() if isinstance(value, str) else value


def _statements(script: str) -> list[str]:
    """Splits a migration into statements (``executescript`` would commit the surrounding transaction)."""
    lines = [line.split("--", 1)[0] for line in script.splitlines()]
    return [part.strip() for part in "\n".join(lines).split(";") if part.strip()]


class CopyTable:
    """``Store.copy_record``: one channel's decisions about copies (``channels.imessage.echo.CopyRecord``)."""

    def __init__(self, store: Store, channel: str) -> None:
        self._store = store
        self._channel = channel

    def verdict(self, rowid: int) -> tuple[bool, int | None]:
        return self._store.copy_verdict(self._channel, rowid)

    def row_with_guid(self, guid: str) -> int | None:
        return self._store.copy_with_guid(self._channel, guid)

    def take_pair(self, own_chat: str, text: str, from_me: bool, since: float) -> int | None:
        return self._store.take_copy_pair(self._channel, own_chat, text, from_me, since)

    def add(self, rowid: int, guid: str, own_chat: str, text: str, from_me: bool, at: float,
            copy_of: int | None) -> None:
        self._store.add_copy(self._channel, rowid, guid, own_chat, text, from_me, at, copy_of)
