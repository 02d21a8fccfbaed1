"""LLM access for the retrieval strategies, and the offline heuristics that stand in for it."""
