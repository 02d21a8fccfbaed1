"""Prompt templates shipped as package files (memsvc/llm/prompts/<name>.{system,user}.txt)."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from string import Template


@dataclass(frozen=True)
class Prompt:
    name: str
    system: str
    user: Template

    def render(self, **values: str) -> tuple[str, str]:
        return self.system, self.user.safe_substitute(values)


class PromptBook:
    """Loads each prompt once; `$name` placeholders are filled at call time."""

    def __init__(self) -> None:
        self._cache: dict[str, Prompt] = {}

    def get(self, name: str) -> Prompt:
        if name not in self._cache:
            folder = resources.files("memsvc.llm") / "prompts"
            system = (folder / f"{name}.system.txt").read_text(encoding="utf-8").strip()
            user = (folder / f"{name}.user.txt").read_text(encoding="utf-8").strip()
            self._cache[name] = Prompt(name, system, Template(user))
        return self._cache[name]
