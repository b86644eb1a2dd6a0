"""The local model for machines without Apple Intelligence: which models (catalog), getting one verified onto
disk (assembly), the server process's life (server), what runs inside it (serve, tool_calls)."""

from apple_flow.localmodel.assembly import AssemblyError
from apple_flow.localmodel.catalog import (
    DEFAULT_MODEL,
    DEFAULT_TASK_MODEL,
    MODELS,
    LocalModel,
    UnknownModel,
    model_named,
)
from apple_flow.localmodel.server import (
    DEFAULT_CONTEXT_TOKENS,
    DEFAULT_MODELS_DIR,
    DEFAULT_STATE_DIR,
    LocalModelError,
    LocalModelServer,
    ServerStatus,
    base_url,
    model_file,
    server_available,
    started_servers,
)

__all__ = [
    "DEFAULT_CONTEXT_TOKENS",
    "DEFAULT_MODEL",
    "DEFAULT_MODELS_DIR",
    "DEFAULT_STATE_DIR",
    "DEFAULT_TASK_MODEL",
    "MODELS",
    "AssemblyError",
    "LocalModel",
    "LocalModelError",
    "LocalModelServer",
    "ServerStatus",
    "UnknownModel",
    "base_url",
    "model_file",
    "model_named",
    "server_available",
    "started_servers",
]
