"""Generated from proto/ by clients/python/generate.py; do not edit."""
