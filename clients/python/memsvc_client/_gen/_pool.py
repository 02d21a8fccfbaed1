"""The private descriptor pool of the generated modules; written by clients/python/generate.py."""

from google.protobuf import descriptor_pool, field_mask_pb2, struct_pb2, timestamp_pb2

_POOL = descriptor_pool.DescriptorPool()
# The well-known types the memsvc protos import must be in the same pool.
for _dependency in (field_mask_pb2, struct_pb2, timestamp_pb2):
    _POOL.AddSerializedFile(_dependency.DESCRIPTOR.serialized_pb)


def Default() -> descriptor_pool.DescriptorPool:
    """Stands in for descriptor_pool.Default() in the generated modules."""
    return _POOL
