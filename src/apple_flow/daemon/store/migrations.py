"""The schema of the daemon's database, versioned with ``PRAGMA user_version``: ``MIGRATIONS[i]`` takes a database
from version ``i`` to ``i + 1`` (``Database`` runs those a database lacks, each in a transaction)."""

from __future__ import annotations

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
    # 4: what each run did, for the web page: the agent's stream-json events (size-bounded, see the run log in
    # running/turn_runner.py), and the message a run answers ("channel:rowid"), whose reply is the one sent.
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
    # 11: the conversation on a phone. The channel's ids of the messages that presented a plan (chat.db guids),
    # so a tapback on one decides its request, across restarts; and the messages that came while the Mac slept
    # (late: listed to their sender, run on `run`), each in the listing it was in.
    """
    CREATE TABLE approval_messages (
        message_id TEXT PRIMARY KEY,  -- the channel's id of (a part of) the reply presenting the plan
        approval_id TEXT NOT NULL
    );
    CREATE TABLE held (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        channel TEXT NOT NULL,
        rowid INTEGER NOT NULL,
        sender TEXT NOT NULL,
        reply_to TEXT NOT NULL,       -- where the listing goes
        text TEXT NOT NULL,
        sent_at REAL NOT NULL,        -- when the sender sent it
        batch INTEGER,                -- NULL until listed; then the listing it was in (the sender's newest counts)
        UNIQUE (channel, rowid)
    );
    CREATE INDEX held_by_sender ON held (sender, batch);
    """,
    # 12: the web page's logins (web_logins.py): sessions the server can end, and one-time login links texted by
    # `web`. Only SHA-256 digests of the secrets are kept; the browser and the text hold the secrets themselves.
    """
    CREATE TABLE web_sessions (
        id TEXT PRIMARY KEY,          -- sha256 of the cookie's value
        created_at REAL NOT NULL,
        expires_at REAL NOT NULL,
        via TEXT NOT NULL             -- token | link:<sender>
    );
    CREATE TABLE web_links (
        id TEXT PRIMARY KEY,          -- sha256 of the link's secret
        sender TEXT NOT NULL,
        created_at REAL NOT NULL,
        expires_at REAL NOT NULL,
        used_at REAL
    );
    """,
    # 13: `escalate <run>`: the approval an approved task's run carried out, and the run an escalation runs again.
    """
    ALTER TABLE runs ADD COLUMN approval TEXT;          -- req_... for kind approve and escalate
    ALTER TABLE runs ADD COLUMN escalated_from TEXT;    -- kind escalate: the failed run it runs again
    CREATE INDEX runs_by_escalated_from ON runs (escalated_from);
    """,
    # 14: a late message that came by SMS or RCS keeps that mark: its listing says so, and `run` gives it the
    # refusals and the read-only rule it would have had on arrival.
    """
    ALTER TABLE held ADD COLUMN forgeable INTEGER NOT NULL DEFAULT 0;
    """,
    # 15: questions from agents (`apple-flow mcp`'s ask_owner) are approval requests too: decided by the owner's
    # tapback, `approve`/`deny` or the web page, or answered by a plain reply (state 'answered', the text in extra).
    """
    ALTER TABLE approvals ADD COLUMN kind TEXT NOT NULL DEFAULT 'task';  -- task | question
    """,
)
SCHEMA_VERSION = len(MIGRATIONS)


def statements(script: str) -> list[str]:
    """Splits a migration into statements (``executescript`` would commit the surrounding transaction)."""
    lines = [line.split("--", 1)[0] for line in script.splitlines()]
    return [part.strip() for part in "\n".join(lines).split(";") if part.strip()]
