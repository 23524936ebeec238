"""The persistent tuning cache: one JSON file of (problem key -> algorithm, config).

Location: ``$CONVGEMM_CACHE_DIR/tune-v1.json`` (default ``~/.cache/convgemm``). Keys carry the GPU
name and compute capability and the Triton and convgemm versions, so a result is only reused where
it was measured. Faults are survived, never fatal:

* a missing file or directory is an empty cache;
* a truncated, garbage or wrong-schema file gives one warning and is treated as empty (the next
  successful store replaces it);
* an unwritable directory gives one warning; results then live in memory only;
* several processes storing at once: each store takes an exclusive ``flock`` on a side lock file,
  re-reads the file, merges its entry and replaces the file atomically (temp file + rename), so no
  valid entry is lost and readers never see a half-written file.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
import warnings
from dataclasses import asdict

SCHEMA = 1
FILENAME = f"tune-v{SCHEMA}.json"

_lock = threading.Lock()
_warned: set[str] = set()


def cache_dir() -> str:
    return os.environ.get("CONVGEMM_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "convgemm")


def cache_path() -> str:
    return os.path.join(cache_dir(), FILENAME)


def _warn_once(kind: str, msg: str) -> None:
    if kind not in _warned:
        _warned.add(kind)
        warnings.warn(f"convgemm tuning cache: {msg}", RuntimeWarning, stacklevel=3)


def _read(path: str) -> dict:
    """The entries of the file at ``path`` ({} if absent; {} and one warning if unreadable)."""
    try:
        with open(path) as f:
            data = json.load(f)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, UnicodeDecodeError) as e:
        _warn_once("read", f"ignoring unreadable {path} ({type(e).__name__}: {e}); it will be rewritten")
        return {}
    if not isinstance(data, dict) or data.get("schema") != SCHEMA or not isinstance(data.get("entries"), dict):
        _warn_once("schema", f"ignoring {path}: not a schema-{SCHEMA} convgemm tuning cache; it will be rewritten")
        return {}
    return {k: v for k, v in data["entries"].items() if _valid_entry(v)}


def _valid_entry(v) -> bool:
    return (
        isinstance(v, dict)
        and isinstance(v.get("algorithm"), str)
        and isinstance(v.get("config"), dict)
        and all(isinstance(x, int) and not isinstance(x, bool) for x in v["config"].values())
    )


class TuneCache:
    """In-memory view of the cache file; ``get`` reads it once, ``put`` merges into it on disk."""

    def __init__(self, path: str | None = None) -> None:
        self.path = path or cache_path()
        self._entries: dict | None = None

    def _load(self) -> dict:
        if self._entries is None:
            self._entries = _read(self.path)
        return self._entries

    def get(self, key: str) -> dict | None:
        with _lock:
            return self._load().get(key)

    def __len__(self) -> int:
        with _lock:
            return len(self._load())

    def put(self, key: str, algorithm: str, config, us: float | None = None) -> None:
        entry = {"algorithm": algorithm, "config": asdict(config) if not isinstance(config, dict) else dict(config)}
        if us is not None:
            entry["us"] = round(float(us), 3)
        with _lock:
            self._load()[key] = entry
            try:
                self._store(key, entry)
            except OSError as e:
                _warn_once("write", f"cannot write {self.path} ({e}); tuning results are kept in memory only")

    def _store(self, key: str, entry: dict) -> None:
        d = os.path.dirname(self.path)
        os.makedirs(d, exist_ok=True)
        with open(self.path + ".lock", "a") as lock:
            try:
                import fcntl

                fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            except ImportError:  # pragma: no cover - not POSIX: atomic rename still protects readers
                pass
            merged = _read(self.path)  # what other processes stored meanwhile
            merged[key] = entry
            fd, tmp = tempfile.mkstemp(dir=d, prefix=".tune-", suffix=".json")
            try:
                with os.fdopen(fd, "w") as f:
                    json.dump({"schema": SCHEMA, "entries": merged}, f, indent=0, sort_keys=True)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, self.path)
            except BaseException:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
                raise
            self._entries = {**merged, **self._entries}
