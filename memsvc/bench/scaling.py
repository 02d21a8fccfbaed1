"""Scaling curves: query latency as memories per user and users grow (table and PNG plot)."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    pass


def run(args: argparse.Namespace) -> int:
    return 0
