"""Health checks, below both the command line and the web page that show them: ``check`` (one result),
``doctor`` (everything the daemon needs, for `apple-flow doctor` and set-up) and ``running`` (the running daemon, for
the web page's health view)."""
