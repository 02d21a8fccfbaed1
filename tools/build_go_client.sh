#!/usr/bin/env bash
# Build, vet and test clients/go with Debian's Go toolchain and Debian's Go sources of grpc
# and protobuf (/usr/share/gocode), offline: GOPATH mode over a copy of the module, since
# module mode would need the module proxy. Arguments go to `go test` (tests/e2e/test_go_client.py
# passes -v -run TestLiveServer with MEMSVC_ADDRESS and MEMSVC_API_KEY set; without them the live
# test skips). The build cache is the repository's ignored .cache/go-build: the build reads
# Debian's Go sources and writes only there and to a temporary copy of the module.
#
# Exit status 3 means the toolchain or the Go sources are not installed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
GOCODE=/usr/share/gocode
APT="apt-get install golang-go golang-google-grpc-dev golang-google-protobuf-dev golang-google-genproto-dev"

if ! command -v go >/dev/null 2>&1; then
  echo "go not found: $APT" >&2
  exit 3
fi
for dir in google.golang.org/grpc google.golang.org/protobuf google.golang.org/genproto/googleapis/rpc; do
  if [[ ! -d "$GOCODE/src/$dir" ]]; then
    echo "$GOCODE/src/$dir not found: $APT" >&2
    exit 3
  fi
done

module="$(awk '$1 == "module" { print $2; exit }' "$ROOT/clients/go/go.mod")"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/src/$(dirname "$module")"
cp -r "$ROOT/clients/go" "$work/src/$module"

cd "$work/src/$module"
export GO111MODULE=off GOPATH="$work:$GOCODE" GOFLAGS= GOPROXY=off
export GOCACHE="$ROOT/.cache/go-build"
go version
unformatted="$(gofmt -l .)"
if [[ -n "$unformatted" ]]; then
  echo "not gofmt-formatted (run gofmt -w clients/go): $unformatted" >&2
  exit 1
fi
go vet ./...
go test -count=1 "$@" ./...
