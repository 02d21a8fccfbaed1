"""Embedders: the bundled local model, or an OpenAI-compatible embedding endpoint."""
