"""The query direction: the six stages (scope, embed, recall, hydrate, rank, bookkeep) and their pipeline."""
