"""`memsvc mcp`: the memory service as Model Context Protocol tools, a client of the gRPC API."""
