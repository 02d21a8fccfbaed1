"""Background jobs: the reconciler, maintenance, and the periodic runner they share."""
