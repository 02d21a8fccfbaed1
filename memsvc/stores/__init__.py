"""Storage adapters behind small protocols: records, vectors and caches."""
