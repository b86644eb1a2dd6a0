"""The running half of the daemon: the loop that pulls messages from the channel (``runtime``), the worker threads
that run turns through the connectors (``workers``, ``scheduler``, ``jobs``, ``message_jobs``, ``web_jobs``), one
turn with its run log (``turn_runner``), sending replies, progress and files (``sending``), the files that came
with a message (``arrivals``), the ingress cursor, the per-database lock, orphaned agents, and the owner's socket
and notices. It asks the deciding half what to do and records every step in the store before acting on it.

Elsewhere: the decisions themselves live in ``apple_flow.daemon.deciding`` (never the other way round: the deciding
half does not import this one); the tables in ``apple_flow.daemon.store``; the daemon is built from the settings in
``apple_flow.assemble``."""
