"""The daemon's web page: runs with their tool calls, commands and diffs, approvals with buttons, health.

``app`` has the routes, ``auth`` the token, session and CSRF rules, ``runview`` and ``health`` read what the pages
show, ``actions`` decides approvals, ``server`` runs it all on a thread of the daemon.
"""
