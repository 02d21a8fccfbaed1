"""memsvc: a long-term memory service for AI assistants, served over gRPC."""

__version__ = "0.1.0"
