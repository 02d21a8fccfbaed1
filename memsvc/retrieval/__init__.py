"""Retrieval strategies built on the query pipeline: multi-query, fusion, applicability, agent, auto."""
