#!/usr/bin/env bash
# Build, vet and test clients/go with Debian's Go toolchain and Debian's Go sources of grpc
# and protobuf (/usr/share/gocode), offline: GOPATH mode over a copy of the module, since
# module mode would need the module proxy.
#
# Exit status 3 means the toolchain or the Go sources are not installed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
GOCODE=/usr/share/gocode
APT="apt-get install golang-go golang-google-grpc-dev golang-google-protobuf-dev"

if ! command -v go >/dev/null 2>&1; then
  echo "go not found: $APT" >&2
  exit 3
fi
for dir in google.golang.org/grpc google.golang.org/protobuf; do
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
go version
go vet ./...
go test ./...
