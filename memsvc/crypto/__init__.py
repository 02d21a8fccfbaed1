"""Envelope encryption of memory content: master key ring, per-user data keys, sealing."""
