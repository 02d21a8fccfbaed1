"""First-start conveniences of the embedded default: local secrets, a development key, its banner."""

from __future__ import annotations

import json
import logging
import os
import shlex
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from memsvc.config import Settings
from memsvc.crypto.keyring import new_key_b64
from memsvc.domain.models import Permission
from memsvc.errors import FailedPrecondition
from memsvc.keys import ApiKeys
from memsvc.stores.records.base import ApiKeyRecords

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LocalSecrets:
    master_keys: str
    pepper: bytes


def local_secrets(settings: Settings) -> LocalSecrets:
    """Configured secrets, or (embedded default only) ones generated once into the data dir."""
    master = settings.master_keys.get_secret_value()
    pepper = settings.api_key_pepper.get_secret_value()
    if master and pepper:
        return LocalSecrets(master, pepper.encode())
    if settings.uses_postgres:
        raise FailedPrecondition(
            "MEMSVC_MASTER_KEYS and MEMSVC_API_KEY_PEPPER must be set outside the embedded default"
        )
    path = settings.local_secrets_path
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        stored = json.loads(path.read_text())
    else:
        stored = {"master_keys": f"1:{new_key_b64()}", "pepper": new_key_b64()}
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            json.dump(stored, fh)
        log.warning("generated local development secrets in %s; set MEMSVC_MASTER_KEYS in production", path)
    return LocalSecrets(master or stored["master_keys"], (pepper or stored["pepper"]).encode())


async def bootstrap_dev_key(settings: Settings, store: ApiKeyRecords, keys: ApiKeys) -> str | None:
    """On the first start of the embedded default, create a development key and save it."""
    if not settings.bootstrap_dev_key or settings.uses_postgres:
        return None
    if await store.list_api_keys():
        return None
    issued = await keys.create(
        "dev", "default", "development", frozenset(Permission), description="development key (first start)"
    )
    path = settings.dev_key_path
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(issued.token + "\n")
    return issued.token


def dev_key_banner(token: str, address: str, settings: Settings) -> str:
    """The first start's message: the key, and lines that work as printed in another shell here."""
    cli = f"{cli_environment(address, settings)}{cli_command(Path.cwd())}"
    # Over TLS the client names the CA that signed the server's certificate (ca.crt here).
    tls = settings.tls_cert_file is not None
    ca, grpcurl = (" --ca-file ca.crt", "-cacert ca.crt") if tls else ("", "-plaintext")
    return (
        "\n"
        "  memsvc created a development API key (shown once; saved to "
        f"{settings.dev_key_path}):\n\n"
        f"    {token}\n\n"
        f"  Try it in another shell, in {shlex.quote(str(Path.cwd()))}:\n"
        f"    {cli} add{ca} --user alice 'I prefer window seats on long flights'\n"
        f"    {cli} query{ca} --user alice 'how do I like to fly?'\n"
        f"    grpcurl {grpcurl} -H 'authorization: Bearer {token}' \\\n"
        f'      -d \'{{"user_id":"alice","query":"how do I like to fly?"}}\' \\\n'
        f"      {address} memsvc.v1.QueryService/Query\n"
    )


def cli_environment(address: str, settings: Settings) -> str:
    """The settings a CLI in a new shell would not assume: where the server listens and where the
    development key is, when they are not the defaults."""
    defaults = Settings.model_fields
    assigned = []
    if address != defaults["listen"].default:
        assigned.append(f"MEMSVC_ADDRESS={shlex.quote(address)}")
    if settings.data_dir != defaults["data_dir"].default:
        assigned.append(f"MEMSVC_DATA_DIR={shlex.quote(str(settings.data_dir))}")
    return "".join(f"{a} " for a in assigned)


def cli_command(cwd: Path) -> str:
    """This process's `memsvc` as a shell in `cwd` reaches it: by name when it is the one on PATH,
    else by its path from `cwd` (`.venv/bin/memsvc` after `make run`), else by its full path."""
    script = Path(sys.argv[0])
    if script.name != "memsvc":  # not started as the console script (`python -m`, a test harness)
        return "memsvc"
    absolute = script if script.is_absolute() else cwd / script
    on_path = shutil.which("memsvc")
    if on_path is not None and absolute.exists() and Path(on_path).samefile(absolute):
        return "memsvc"
    try:
        return shlex.quote(str(absolute.relative_to(cwd)))
    except ValueError:
        return shlex.quote(str(absolute))
