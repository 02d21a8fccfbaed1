"""First-start conveniences of the embedded default: local secrets, a development key, its banner."""

from __future__ import annotations

import json
import logging
import os
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


def dev_key_banner(token: str, listen: str, key_path: Path, tls: bool = False) -> str:
    # Over TLS the client names the CA that signed the server's certificate (ca.crt here).
    cli, grpcurl = (" --ca-file ca.crt", "-cacert ca.crt") if tls else ("", "-plaintext")
    return (
        "\n"
        "  memsvc created a development API key (shown once; saved to "
        f"{key_path}):\n\n"
        f"    {token}\n\n"
        "  Try it:\n"
        f"    memsvc add{cli} --user alice 'I prefer window seats on long flights'\n"
        f"    memsvc query{cli} --user alice 'how do I like to fly?'\n"
        f"    grpcurl {grpcurl} -H 'authorization: Bearer {token}' \\\n"
        f'      -d \'{{"user_id":"alice","query":"how do I like to fly?"}}\' \\\n'
        f"      {listen} memsvc.v1.QueryService/Query\n"
    )
