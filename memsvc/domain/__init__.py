"""Domain types of memsvc: plain data with no dependency on transport or storage."""
