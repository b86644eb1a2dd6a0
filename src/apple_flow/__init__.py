"""apple-flow: text your Mac, and a private on-device coding agent answers."""

__version__ = "0.1.0"
