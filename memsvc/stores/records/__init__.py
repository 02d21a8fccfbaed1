"""Record stores: the source of truth (SQLite by default, PostgreSQL past one machine)."""
