"""Vector indexes: Milvus (Lite file or server) behind one small protocol."""
