"""Caches: embeddings and query results, in process by default, Redis when shared."""
