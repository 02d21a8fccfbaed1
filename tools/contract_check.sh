#!/usr/bin/env bash
# Contract checks of proto/: buf lint (STANDARD) and buf breaking (FILE) against the last
# commit on main. BUF_BREAKING_AGAINST=<buf input> overrides the baseline.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

"$ROOT/tools/ensure_node_modules.sh"
BUF="$ROOT/node_modules/.bin/buf"

echo "buf lint"
"$BUF" lint

# The baseline: main as a local branch (a developer's clone, CI's fresh clone of main),
# else origin/main (a clone checked out on another branch or a detached commit). Without
# either, or when the baseline has no proto/ yet, there is nothing to compare against.
baseline_input() {
  if [[ -n "${BUF_BREAKING_AGAINST:-}" ]]; then
    echo "$BUF_BREAKING_AGAINST"
    return
  fi
  if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    echo "buf breaking skipped: not a git work tree, no history to compare against" >&2
    return
  fi
  local ref input
  if git rev-parse --verify --quiet refs/heads/main >/dev/null; then
    ref=refs/heads/main
    input=".git#branch=main,subdir=proto"
  elif git rev-parse --verify --quiet refs/remotes/origin/main >/dev/null; then
    ref=refs/remotes/origin/main
    input=".git#ref=origin/main,subdir=proto"
  else
    echo "buf breaking skipped: no main branch in this clone" >&2
    return
  fi
  if ! git cat-file -e "$ref:proto" 2>/dev/null; then
    echo "buf breaking skipped: $ref has no proto/ directory yet" >&2
    return
  fi
  echo "$input"
}

against="$(baseline_input)"
if [[ -n "$against" ]]; then
  echo "buf breaking --against '$against'"
  "$BUF" breaking --against "$against"
fi
echo "contract checks passed"
