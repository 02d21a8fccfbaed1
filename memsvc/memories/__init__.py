"""The memory's home: sealing and opening rows (codec), indexing them (indexer), announcing changes."""
