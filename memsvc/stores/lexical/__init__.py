"""The lexical channel: keyed-hash term postings with BM25 weights, never readable text."""
