#!/usr/bin/env bash
# Regenerate the TypeScript and Go client code from proto/ with buf generate, one template
# per language (clients/<language>/buf.gen.yaml).
#
#   tools/gen_clients.sh                     regenerate every client in place
#   tools/gen_clients.sh --out DIR           write under DIR instead (for staleness checks)
#   tools/gen_clients.sh --lang typescript   only one language (typescript or go; repeatable)
#
# Exit status 3 means a code generator is not installed (the message says which).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

out=""
langs=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) out="$2"; shift 2 ;;
    --lang) langs+=("$2"); shift 2 ;;
    *) echo "usage: $0 [--out DIR] [--lang typescript|go]..." >&2; exit 2 ;;
  esac
done
[[ ${#langs[@]} -gt 0 ]] || langs=(typescript go)

"$ROOT/tools/ensure_node_modules.sh"
export PATH="$ROOT/node_modules/.bin:$PATH"

for lang in "${langs[@]}"; do
  template="clients/$lang/buf.gen.yaml"
  if [[ ! -f "$template" ]]; then
    echo "unknown client language: $lang" >&2
    exit 2
  fi
  if [[ "$lang" == go ]]; then
    for plugin in protoc-gen-go protoc-gen-go-grpc; do
      if ! command -v "$plugin" >/dev/null 2>&1; then
        echo "$plugin not found: apt-get install protoc-gen-go protoc-gen-go-grpc" >&2
        exit 3
      fi
    done
  fi
  echo "buf generate --template $template${out:+ -o $out}"
  buf generate --template "$template" ${out:+-o "$out"}
done
