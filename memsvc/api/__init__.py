"""The gRPC edge: servicers, the interceptor, errors and proto <-> domain translation.

Only this package imports grpc and the generated protobuf code.
"""
