"""Runs `veil ARGS...` with every write to the process environment recorded, one JSON line each in the file
named by $VEIL_TEST_ENV_WRITES: the variable, whether it is new, the writing thread, and the other Python
threads alive then (the main thread too, when another thread writes).

`python tests/support/env_writes.py sweep spec.yaml ...`. Adding a name while another thread reads the
environment in native code can crash the process (see `veil.process_env`), so tests assert that no name is
added beside another thread. (Replacing or removing a name frees nothing.)"""

from __future__ import annotations

import json
import os
import runpy
import sys
import threading

_putenv, _unsetenv = os.putenv, os.unsetenv


def _record(op: str, key: object) -> None:
    me = threading.current_thread()
    others = [t.name for t in threading.enumerate() if t is not me and t.is_alive()]
    name = key.decode() if isinstance(key, bytes) else str(key)
    new = name not in os.environ  # os.environ's mapping takes the name after this call
    with open(os.environ["VEIL_TEST_ENV_WRITES"], "a") as f:
        f.write(json.dumps({"op": op, "key": name, "new": new, "thread": me.name, "others": others}) + "\n")


def putenv(key, value):  # type: ignore[no-untyped-def]
    _record("set", key)
    _putenv(key, value)


def unsetenv(key):  # type: ignore[no-untyped-def]
    _record("unset", key)
    _unsetenv(key)


if __name__ == "__main__":
    os.putenv, os.unsetenv = putenv, unsetenv  # os.environ's writes look these up in os at each call
    sys.argv = ["veil", *sys.argv[1:]]
    runpy.run_module("veil.cli", run_name="__main__")
