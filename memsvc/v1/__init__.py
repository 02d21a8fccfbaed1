"""Generated from proto/memsvc/v1 by tools/gen_proto.py; do not edit."""
