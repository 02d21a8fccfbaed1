"""The generated memsvc.v1 message and stub modules, for calls through the raw stubs.

Build requests with these classes (not the server package's): they live in the client's own
descriptor pool. Pass ``client.metadata`` and a ``timeout`` to every raw call.
"""

from memsvc_client._gen.memsvc.v1 import (
    memory_pb2,
    query_service_pb2,
    query_service_pb2_grpc,
    write_service_pb2,
    write_service_pb2_grpc,
)

__all__ = ["memory_pb2", "query_service_pb2", "query_service_pb2_grpc", "write_service_pb2", "write_service_pb2_grpc"]
