"""Health checks, below both the command line and the web page that show them: ``doctor`` (everything the daemon
needs, for `apple-flow doctor` and set-up) and ``running`` (the running daemon, for the web page's health view). Each
reports ``check_result.CheckResult``s, the type the daemon's own permission checks report too."""
