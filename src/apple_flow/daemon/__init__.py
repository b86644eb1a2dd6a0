"""The daemon, in two halves and its store.

- ``deciding/``: what to do. Given a message, the store's state (read only) and a view of what runs now, it returns
  plain records (``decisions``); what a finished turn means (``conclusion``); the replies to commands. It runs
  nothing, sends nothing, starts no thread and never imports the running half.
- ``running/``: doing it. The loop that takes messages from the channel, the worker threads that run turns through
  the connectors, the sending of replies and files, the cursor, the run log, the lock and the owner's socket.
- ``store/``: the SQLite tables both halves record to (the deciding half only reads).

The daemon is built from the settings in one place, ``apple_flow.assemble``; channels and connectors are reached
only through their base modules' Protocols."""
