"""YAML as Veil reads a user's files: safe-loaded (no Python tags), and a mapping that repeats a key is an error.

PyYAML's `safe_load` keeps the last of two equal keys without a word, so a run file with `method: gpp` and later
`method: eigan` ran EIGAN, and a sweep's second `trials:` replaced its first. The error is PyYAML's own
`ConstructorError`, with the line and column of the repeated key, so callers report it as any broken YAML."""

from __future__ import annotations

from typing import Any

import yaml


class _UniqueKeyLoader(yaml.SafeLoader):
    """`yaml.SafeLoader` that refuses a mapping with a repeated key."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *anchor` merges; its keys may be overridden
                continue
            key = self.construct_object(key_node, deep=deep)
            try:
                repeated = key in seen
            except TypeError:  # an unhashable key: SafeLoader's own construct_mapping reports it
                break
            if repeated:
                raise yaml.constructor.ConstructorError(
                    "while reading a mapping", node.start_mark, f"the key {key!r} appears twice", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def load(text: str) -> Any:
    """The YAML document in `text`, safe-loaded, with every mapping's keys unique."""
    return yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass


__all__ = ["load"]
