"""The deciding half of the daemon: policy, commands, approvals, escalation, the replies to ``status`` and
``health``, and what a finished turn means. Every function here takes what it needs and returns a plain record
(``decisions``); nothing here runs a process, starts a thread, sends a message or writes to the store (the store's
state comes in through ``state_view``'s read-only Protocols).

Elsewhere: doing what is decided lives in ``apple_flow.daemon.running``; the tables in ``apple_flow.daemon.store``;
talking to Messages in ``apple_flow.channels``; running an agent in ``apple_flow.connectors``."""
