"""Is the Hugging Face hub reachable (one HEAD request per process), and is a hub model in the local cache?
Torch-free."""

from __future__ import annotations

import os
import threading
import urllib.error
import urllib.request

PROBE_SECONDS = 2.0
DEFAULT_ENDPOINT = "https://huggingface.co"
OFFLINE_VARS = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")

# the way out for weights downloaded before (on another machine, or before the network went)
PREDOWNLOADED = ("; weights downloaded before: set HF_HOME (or HF_HUB_CACHE) to the folder that holds them, "
                 "and HF_HUB_OFFLINE=1")
_decided: dict[str, str | None] = {}  # endpoint -> None (reachable) or why not


def _probe(url: str, result: list) -> None:
    try:
        urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=PROBE_SECONDS).close()
    except urllib.error.HTTPError:
        pass  # the hub answered (an error status is still an answer)
    except (OSError, ValueError) as err:  # URLError, a timeout, a refused connection, a malformed HF_ENDPOINT
        result.append(" ".join(str(getattr(err, "reason", err)).split()) or type(err).__name__)
        return
    result.append(None)


def unreachable() -> str | None:
    """Why the hub cannot be used from this process (None: it answered). Asked once per endpoint."""
    # the variable that switches the hub off, if one is set (to a true value)
    var = next((v for v in OFFLINE_VARS if os.environ.get(v, "").strip().lower() in ("1", "on", "yes", "true")), None)
    if var:
        return f"{var} is set"
    url = os.environ.get("HF_ENDPOINT", DEFAULT_ENDPOINT).rstrip("/")
    if url not in _decided:
        result: list = []
        worker = threading.Thread(target=_probe, args=(url, result), daemon=True)  # a DNS lookup has no timeout
        worker.start()
        worker.join(PROBE_SECONDS + 0.5)
        why = result[0] if result else f"no answer within {PROBE_SECONDS:.0f} s"
        _decided[url] = None if result and result[0] is None else f"{url}: {why}"
    return _decided[url]


def in_cache(repo_id: str, revision: str | None = None) -> bool:
    """Whether the local hub cache holds ``repo_id``'s config.json at ``revision`` (default main)."""
    from huggingface_hub import try_to_load_from_cache

    try:
        found = try_to_load_from_cache(repo_id, "config.json", revision=revision)
    except ValueError:  # not a valid repo id
        return False
    return isinstance(found, str)


def usable_offline(repo_id: str, revision: str | None = None) -> str | None:
    """None when ``repo_id`` can be loaded here (the hub answers, or it is cached: then offline); else why not."""
    why = unreachable()
    if why is None:
        return None
    if in_cache(repo_id, revision):  # offline mode for this process and the ones it starts: the local cache only
        os.environ["HF_HUB_OFFLINE"] = "1"
        import huggingface_hub.constants

        huggingface_hub.constants.HF_HUB_OFFLINE = True  # read when each request is made
        return None
    return why
