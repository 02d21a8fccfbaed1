"""The `memsvc` command: serve, migrate, manage keys, and client calls for ad-hoc work."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import shutil
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from memsvc import eventloop, logs
from memsvc.config import Settings, load_settings
from memsvc.domain.models import MemoryKind, Permission
from memsvc.pipeline.context import QueryMode
from memsvc.terminal import RENDERERS, ids_of, render
from memsvc.tls import add_client_tls_arguments, client_tls_of, server_certificates


def _settings(args: argparse.Namespace) -> Settings:
    return load_settings(getattr(args, "config", None))


def _api_key(args: argparse.Namespace, settings: Settings) -> str:
    if args.api_key:
        return str(args.api_key)
    env = os.environ.get("MEMSVC_API_KEY")
    if env:
        return env
    if settings.dev_key_path.exists():
        return settings.dev_key_path.read_text().strip()
    raise SystemExit(
        "no API key: pass --api-key, set MEMSVC_API_KEY, or start `memsvc serve` once to create a development key"
    )


def _client(args: argparse.Namespace) -> Any:
    from memsvc.api.client import MemoryClient

    settings = _settings(args)
    address = args.address or os.environ.get("MEMSVC_ADDRESS") or settings.listen
    return MemoryClient(address, _api_key(args, settings), timeout_s=args.timeout, tls=client_tls_of(args, settings))


def _print(data: Any) -> None:
    print(json.dumps(data, indent=2, ensure_ascii=False))


def _show(args: argparse.Namespace, data: dict[str, Any]) -> None:
    """A client command's answer: JSON for scripts (`--json`, or stdout not a terminal), ids with
    `--quiet`, and a compact table for a person at a terminal."""
    if args.quiet:
        print("\n".join(ids_of(args.command, data)))
    elif args.json or not sys.stdout.isatty():
        _print(data)
    else:
        print(render(args.command, data, shutil.get_terminal_size().columns))


def cmd_serve(args: argparse.Namespace) -> int:
    from memsvc.server import run_server

    settings = _settings(args)
    workers = settings.resolved_workers
    if workers > 1:
        from memsvc.workers import Supervisor

        return Supervisor(settings, workers).run()
    eventloop.run(run_server(settings))
    return 0


def cmd_migrate(args: argparse.Namespace) -> int:
    from memsvc.stores.records.factory import build_record_store

    async def migrate() -> list[int]:
        store = build_record_store(_settings(args))
        try:
            return await store.migrate()
        finally:
            await store.close()

    applied = asyncio.run(migrate())
    print(f"applied migrations: {applied}" if applied else "schema is up to date")
    return 0


def cmd_keys(args: argparse.Namespace) -> int:
    from memsvc.bootstrap import local_secrets
    from memsvc.keys import ApiKeys
    from memsvc.stores.records.factory import build_record_store

    settings = _settings(args)

    async def run() -> int:
        store = build_record_store(settings)
        try:
            await store.check_schema() if settings.uses_postgres else await store.migrate()
            keys = ApiKeys(store, local_secrets(settings).pepper)
            if args.keys_command == "create":
                ttl = args.ttl_days * 86400 if args.ttl_days else None
                issued = await keys.create(
                    args.tenant, args.project, args.environment, frozenset(args.permissions), ttl, args.description
                )
                print(issued.token)
                granted = ",".join(p.value for p in args.permissions)
                print(
                    f"key {issued.record.key_id}: tenant={args.tenant} project={args.project} "
                    f"environment={args.environment} permissions={granted} (shown once)",
                    file=sys.stderr,
                )
            elif args.keys_command == "list":
                for r in await store.list_api_keys():
                    state = "revoked" if r.revoked_at else "active"
                    perms = ",".join(sorted(p.value for p in r.permissions))
                    print(f"{r.key_id}  {r.tenant}/{r.project}/{r.environment}  {perms}  {state}  {r.description}")
            elif args.keys_command == "rotate-master":
                return await _rotate_master(store, local_secrets(settings).master_keys)
            else:
                if not await keys.revoke(args.key_id):
                    print(f"no active key {args.key_id}", file=sys.stderr)
                    return 1
                print(f"revoked {args.key_id}")
            return 0
        finally:
            await store.close()

    return asyncio.run(run())


async def _rotate_master(store: Any, master_keys: str) -> int:
    from memsvc.crypto.keyring import MasterKeyRing
    from memsvc.crypto.rotation import rotate_master_key

    ring = MasterKeyRing.parse(master_keys)
    report = await rotate_master_key(store, ring)
    print(
        f"re-wrapped {report.rewrapped} data keys{' and the key derivation root' if report.root_rewrapped else ''} "
        f"under master key {ring.primary_version}; "
        f"{report.orphaned} without memories left as they are; {report.changed_concurrently} changed meanwhile; "
        f"{report.unreadable} need a master key that is not configured"
    )
    return 1 if report.unreadable else 0


def memory_content(words: Sequence[str], file: str | None) -> str:
    """The content of `memsvc add`: its words, or what `--file` holds, or standard input for `-`
    (a long text does not fit on a command line). Newlines at the end of a file are not content."""
    if file is not None and words:
        raise ValueError("give the content as words or with --file, not both")
    if file is None and list(words) == ["-"]:
        file = "-"
    if file is None:
        if not words:
            raise ValueError("give the content as words, with --file PATH, or - to read standard input")
        return " ".join(words)
    text = sys.stdin.read() if file == "-" else Path(file).read_text(encoding="utf-8")
    return text.rstrip("\r\n")


def cmd_add(args: argparse.Namespace) -> int:
    try:
        content = memory_content(args.content, args.file)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    memory: dict[str, Any] = {"content": content, "tags": args.tag or []}
    if args.kind:
        memory["kind"] = f"MEMORY_KIND_{args.kind.upper()}"
    if args.role:
        memory["role"] = f"ROLE_{args.role.upper()}"
    if args.session:
        memory["session_id"] = args.session
    if args.importance is not None:
        memory["importance"] = args.importance
    _show(args, _client(args).add(args.user, [memory]))
    return 0


_TURN_FIELDS = {"role", "content", "name", "create_time", "time"}
_TURN_ROLES = ("USER", "ASSISTANT", "SYSTEM")


def read_turns(lines: Iterable[str]) -> list[dict[str, Any]]:
    """ConversationTurn dicts from JSON Lines: {"role", "content", "name", "time" (RFC 3339)}."""
    turns: list[dict[str, Any]] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"line {number}: not JSON ({exc.msg})") from exc
        if not isinstance(raw, dict) or not isinstance(raw.get("content"), str):
            raise ValueError(f'line {number}: expected an object with a "content" string')
        unknown = set(raw) - _TURN_FIELDS
        if unknown:
            raise ValueError(f"line {number}: unknown field(s) {', '.join(sorted(unknown))}")
        # "user" or "ROLE_USER", as the API spells it.
        role = str(raw.get("role", "user")).upper().removeprefix("ROLE_")
        if role not in _TURN_ROLES:
            raise ValueError(f"line {number}: role must be one of {', '.join(r.lower() for r in _TURN_ROLES)}")
        turn: dict[str, Any] = {"content": raw["content"], "role": f"ROLE_{role}"}
        if raw.get("name"):
            turn["name"] = raw["name"]
        if raw.get("time") or raw.get("create_time"):
            turn["create_time"] = raw.get("time") or raw.get("create_time")
        turns.append(turn)
    return turns


def cmd_add_conversation(args: argparse.Namespace) -> int:
    try:
        if args.file == "-":
            turns = read_turns(sys.stdin)
        else:
            with open(args.file, encoding="utf-8") as lines:
                turns = read_turns(lines)
    except (OSError, ValueError) as exc:
        print(f"{args.file}: {exc}", file=sys.stderr)
        return 2
    _show(args, _client(args).add_conversation(args.user, args.session, turns, args.first_turn_index))
    return 0


def cmd_query(args: argparse.Namespace) -> int:
    fields: dict[str, Any] = {"limit": args.limit, "mode": f"QUERY_MODE_{args.mode.upper()}"}
    if args.include_sources:
        fields["include_sources"] = True
    if args.min_importance is not None:
        fields["filter"] = {"min_importance": args.min_importance}
    _show(args, _client(args).query(args.user, " ".join(args.text), **fields))
    return 0


def cmd_get(args: argparse.Namespace) -> int:
    _show(args, _client(args).get(args.user, args.id))
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    _show(args, _client(args).list(args.user, args.page_size, args.page_token))
    return 0


def cmd_forget(args: argparse.Namespace) -> int:
    _show(args, _client(args).forget(args.user))
    return 0


def cmd_maintain(args: argparse.Namespace) -> int:
    """One maintenance pass (decay, usage percentiles, tiers, expiry) and one reconciliation."""
    from memsvc.server import build_components

    settings = _settings(args)

    async def run() -> dict[str, Any]:
        components = await build_components(settings)
        try:
            assert components.maintenance is not None
            report = await components.maintenance.run_once()
            reconciled = await components.reconciler.run_once()
            return {
                "ran": report.ran,
                "note": report.note,
                "scanned": report.scanned,
                "decay_updated": report.decay_updated,
                "tier_moves": report.tier_moves,
                "expired_deleted": report.expired_deleted,
                "retention_deleted": report.retention_deleted,
                "recall_events_pruned": report.recall_events_pruned,
                "tenants_with_usage": report.tenants_with_usage,
                "reindexed": reconciled.indexed,
                "vectors_deleted": reconciled.vectors_deleted,
            }
        finally:
            await components.close()

    _print(asyncio.run(run()))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    """Write the user's memories as JSON Lines (docs/export-format.md) to stdout."""
    client = _client(args)
    count = 0
    for line in client.export_lines(args.user):
        sys.stdout.write(line + "\n")
        count += 1
    sys.stdout.flush()
    print(f"exported {count} memories of {args.user}", file=sys.stderr)
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    """Read JSON Lines (docs/export-format.md) from stdin and import them for the user."""
    from memsvc.api.client import memory_record
    from memsvc.v1 import memory_pb2

    client = _client(args)
    totals = {"imported": 0, "skipped": 0}
    batch: list[memory_pb2.MemoryRecord] = []

    def flush() -> None:
        if batch:
            result = client.import_records(args.user, batch)
            totals["imported"] += result["imported"]
            totals["skipped"] += result["skipped"]
            batch.clear()

    def summary() -> str:
        return f"imported {totals['imported']}, skipped {totals['skipped']} (imported before)"

    for number, line in enumerate(sys.stdin, 1):
        if not line.strip():
            continue
        try:
            batch.append(memory_record(line))
        except ValueError as exc:
            # What came before the line goes in; a rerun after the fix skips it (imports are idempotent).
            flush()
            print(f"error: line {number} is not a memory record ({exc}); {summary()} before it", file=sys.stderr)
            return 2
        if len(batch) >= args.batch:
            flush()
    flush()
    print(summary(), file=sys.stderr)
    return 0


def cmd_history(args: argparse.Namespace) -> int:
    _show(args, _client(args).history(args.user, args.id))
    return 0


def cmd_mcp(args: argparse.Namespace) -> int:
    """Serve the memory tools over MCP, calling the memsvc server at --address with gRPC."""
    from memsvc.mcp.server import McpOptions, run

    settings = _settings(args)
    address = args.address or os.environ.get("MEMSVC_ADDRESS") or settings.listen
    # Over HTTP each request brings its own key; a key of the process would answer for callers without one.
    api_key = _api_key(args, settings) if args.transport == "stdio" else ""
    https = server_certificates(settings) if args.transport == "http" else None
    tls = client_tls_of(args, settings)
    run(McpOptions(address, args.transport, api_key, args.host, args.port, args.timeout, tls, https))
    return 0


# `memsvc bench <name>` runs memsvc/bench/<name>.py: `add_arguments(parser)` and `run(args) -> int`.
BENCHMARKS = ("query", "write", "scaling", "locomo", "updates", "load")


def cmd_bench(args: argparse.Namespace) -> int:
    module = importlib.import_module(f"memsvc.bench.{args.bench_command}")
    return int(module.run(args))


def _settings_file(text: str) -> str:
    """`--config`: the settings library skips a file it cannot find, and a typo would run on defaults."""
    if not os.path.isfile(text):
        raise argparse.ArgumentTypeError(f"no settings file {text!r}")
    return text


def _permission_list(text: str) -> tuple[Permission, ...]:
    """`--permissions`, parsed while parsing the command line: a typo is a usage error, not a traceback."""
    names = [p.strip() for p in text.split(",")]
    known = [p.value for p in Permission]
    unknown = [p for p in names if p not in known]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown permission {unknown[0]!r} (choose from {', '.join(known)})")
    return tuple(Permission(p) for p in names)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memsvc", description="Long-term memory service for AI assistants.")
    parser.add_argument("--config", type=_settings_file, help="a dotenv-style settings file (MEMSVC_* keys)")
    sub = parser.add_subparsers(dest="command", required=True)

    sub.add_parser("serve", help="run the gRPC server").set_defaults(func=cmd_serve)
    sub.add_parser("migrate", help="apply record-store schema migrations").set_defaults(func=cmd_migrate)

    keys = sub.add_parser("keys", help="manage API keys")
    keys_sub = keys.add_subparsers(dest="keys_command", required=True)
    create = keys_sub.add_parser("create", help="create an API key (printed once)")
    create.add_argument("--tenant", required=True)
    create.add_argument("--project", default="default")
    create.add_argument("--environment", default="development", choices=["development", "staging", "production"])
    create.add_argument(
        "--permissions", default="read,write", type=_permission_list, help="comma list of read, write, admin"
    )
    create.add_argument("--ttl-days", type=float, default=0.0)
    create.add_argument("--description", default="")
    keys_sub.add_parser("list", help="list API keys")
    revoke = keys_sub.add_parser("revoke", help="revoke an API key")
    revoke.add_argument("key_id")
    keys_sub.add_parser(
        "rotate-master",
        help="re-wrap every data key under the first key of MEMSVC_MASTER_KEYS (servers may keep serving)",
    )
    keys.set_defaults(func=cmd_keys)

    def client_command(name: str, help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text)
        p.add_argument("--address", help="server address (default MEMSVC_ADDRESS or MEMSVC_LISTEN)")
        p.add_argument("--api-key", help="API key (default MEMSVC_API_KEY or the development key)")
        p.add_argument("--timeout", type=float, default=30.0, help="deadline in seconds")
        add_client_tls_arguments(p)
        p.add_argument("--user", required=True, help="user id")
        if name in RENDERERS:
            p.set_defaults(command=name)
            output = p.add_mutually_exclusive_group()
            output.add_argument("--json", action="store_true", help="print the full response as JSON")
            output.add_argument("--quiet", action="store_true", help="print only ids, one per line")
        return p

    add = client_command("add", "add a memory")
    add.add_argument("content", nargs="*", help="the memory's text; - reads it from standard input")
    add.add_argument("--file", help="read the memory's text from this file (- for standard input)")
    add.add_argument("--tag", action="append")
    add.add_argument("--kind", choices=[k.value for k in MemoryKind])
    add.add_argument("--role", choices=["user", "assistant", "system"])
    add.add_argument("--session")
    add.add_argument("--importance", type=float)
    add.set_defaults(func=cmd_add)

    conversation = client_command(
        "add-conversation", "add a session's turns from a JSON Lines file: evidence, extracted memories, summary"
    )
    conversation.add_argument(
        "file", help='JSON Lines, one turn per line: {"role", "content", "name", "time"}; - for stdin'
    )
    conversation.add_argument("--session", required=True, help="the conversation session id")
    conversation.add_argument(
        "--first-turn-index", type=int, default=0, help="the index in the session of the file's first turn"
    )
    conversation.set_defaults(func=cmd_add_conversation)

    query = client_command("query", "query memories")
    query.add_argument("text", nargs="+")
    query.add_argument("--limit", type=int, default=10)
    query.add_argument("--mode", default="direct", choices=[mode.value for mode in QueryMode])
    query.add_argument("--min-importance", type=float)
    query.add_argument("--include-sources", action="store_true", help="return what derived memories came from")
    query.set_defaults(func=cmd_query)

    get = client_command("get", "get one memory")
    get.add_argument("id")
    get.set_defaults(func=cmd_get)

    listing = client_command("list", "list memories, newest first")
    listing.add_argument("--page-size", type=int, default=50)
    listing.add_argument("--page-token", default="")
    listing.set_defaults(func=cmd_list)

    forget = client_command("forget", "erase everything of one user")
    forget.set_defaults(func=cmd_forget)

    maintain = sub.add_parser("maintain", help="one maintenance pass: decay, usage, tiers, expiry (for a CronJob)")
    maintain.set_defaults(func=cmd_maintain)

    export = client_command("export", "write a user's memories with their history as JSON Lines to stdout")
    export.set_defaults(func=cmd_export)

    import_ = client_command("import", "import JSON Lines from stdin (idempotent; keeps ids and created_at)")
    import_.add_argument("--batch", type=int, default=100, help="records per ImportMemories call")
    import_.set_defaults(func=cmd_import)

    history = client_command("history", "the versions of one memory")
    history.add_argument("id")
    history.set_defaults(func=cmd_history)

    mcp = sub.add_parser(
        "mcp",
        help="serve remember, recall, forget, list and history as MCP tools (stdio or streamable HTTP)",
        description="An MCP server whose tools call the memsvc server at --address over gRPC. On stdio every "
        "call uses the API key of --api-key, MEMSVC_API_KEY or the development key; over HTTP every request "
        "must bring its own as 'Authorization: Bearer <key>' (401 without one). The HTTP transport serves "
        "HTTPS with the server's certificate settings (MEMSVC_TLS_CERT_FILE, MEMSVC_TLS_KEY_FILE and, for "
        "client certificates, MEMSVC_TLS_CLIENT_CA_FILE); the TLS flags below are for reaching memsvc.",
    )
    mcp.add_argument("--address", help="memsvc server address (default MEMSVC_ADDRESS or MEMSVC_LISTEN)")
    mcp.add_argument("--api-key", help="stdio only: API key (default MEMSVC_API_KEY or the development key)")
    mcp.add_argument("--timeout", type=float, default=30.0, help="deadline of each gRPC call in seconds")
    add_client_tls_arguments(mcp)
    mcp.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    mcp.add_argument("--host", default="127.0.0.1", help="http only: the interface to listen on")
    mcp.add_argument("--port", type=int, default=8765, help="http only: the port to listen on (path /mcp)")
    mcp.set_defaults(func=cmd_mcp)

    bench = sub.add_parser("bench", help="run a benchmark against an in-process server")
    bench_sub = bench.add_subparsers(dest="bench_command", required=True)
    for name in BENCHMARKS:
        module = importlib.import_module(f"memsvc.bench.{name}")
        doc = (module.__doc__ or name).strip().splitlines()[0]
        module.add_arguments(bench_sub.add_parser(name, help=doc, description=doc))
    bench.set_defaults(func=cmd_bench)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    logs.configure()
    args = build_parser().parse_args(argv)
    from pydantic import ValidationError

    from memsvc.api.client import ClientError
    from memsvc.errors import MemsvcError

    try:
        return int(args.func(args))
    except ClientError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except MemsvcError as exc:
        # Start-up and admin commands: say what is wrong (schema not migrated, database down).
        print(f"error: {exc.message}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # `memsvc query ... | head`: the reader left; what it did not read was not wanted.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except ValidationError as exc:
        for error in exc.errors():
            where = "MEMSVC_" + "__".join(str(part) for part in error["loc"]).upper() if error["loc"] else "settings"
            print(f"error: {where}: {error['msg']}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
