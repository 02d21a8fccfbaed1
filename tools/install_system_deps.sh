#!/usr/bin/env bash
# System packages the test suite needs beyond Python and Node: the Go toolchain and the Go
# protobuf plugins (to generate and build clients/go). Installed from Debian when missing and
# when we may (root with apt-get); otherwise the Go checks skip with a reason.
set -euo pipefail
needed=()
command -v go >/dev/null || needed+=(golang-go)
command -v protoc-gen-go >/dev/null || needed+=(protoc-gen-go)
command -v protoc-gen-go-grpc >/dev/null || needed+=(protoc-gen-go-grpc)
[ -d /usr/share/gocode/src/google.golang.org/grpc ] || needed+=(golang-google-grpc-dev)
[ -d /usr/share/gocode/src/google.golang.org/protobuf ] || needed+=(golang-google-protobuf-dev)
# google.rpc error details for the Go client (grpc's package depends on it; named for clarity).
[ -d /usr/share/gocode/src/google.golang.org/genproto/googleapis/rpc/errdetails ] || needed+=(golang-google-genproto-dev)
[ ${#needed[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  echo "not installing ${needed[*]} (needs root and apt-get); the Go client checks will skip" >&2
  exit 0
fi
echo "installing ${needed[*]}" >&2
apt-get update -qq >/dev/null
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${needed[@]}" >/dev/null
