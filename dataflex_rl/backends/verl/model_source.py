"""Where a verl model's weights come from, checked by the dry run without the network.

`models.<m>.path` is either a local directory (verl and vLLM load it as is) or a Hugging Face hub name, which every
train and score job resolves at its start through the hub cache (HF_HOME / HF_HUB_CACHE): from the cache alone when
HF_HUB_OFFLINE=1 (a compute node without a network), else by downloading what the cache lacks. The jobs inherit the
environment the workflow is started from (the Slurm executor submits with --export=ALL), so the dry run judges a hub
name by that same environment.
"""
from __future__ import annotations

from pathlib import Path

from dataflex_rl.backends.verl.weight_files import weight_file_problems

WEIGHT_PATTERNS = ("*.safetensors", "*.bin")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json")
PREFETCH = "README 'Models on offline cluster nodes'"


def is_local(path: str, workdir: Path) -> bool:
    """A path, not a hub name: written as one, or an existing directory (which the loaders prefer over the hub)."""
    return path.startswith(("/", ".")) or (workdir / path).is_dir()


def missing_model_files(directory: Path) -> list[str]:
    """What a Hugging Face model directory lacks for verl and vLLM to load it: its config, weights and tokenizer."""
    missing = [] if (directory / "config.json").is_file() else ["config.json"]
    if not any(any(directory.glob(pattern)) for pattern in WEIGHT_PATTERNS):
        missing.append(f"weights ({' or '.join(WEIGHT_PATTERNS)})")
    if not any((directory / name).is_file() for name in TOKENIZER_FILES):
        missing.append(f"a tokenizer ({', '.join(TOKENIZER_FILES)})")
    return missing


def hub_cache() -> str:
    from huggingface_hub import constants

    return constants.HF_HUB_CACHE


def hub_offline() -> bool:
    """HF_HUB_OFFLINE (or TRANSFORMERS_OFFLINE) as huggingface_hub reads it."""
    from huggingface_hub import is_offline_mode

    return is_offline_mode()


def cached_snapshot(name: str) -> Path | None:
    """The hub cache's snapshot of `name` at its main revision, if the cache holds one (a look-up, no network)."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        return Path(snapshot_download(name, local_files_only=True))
    except LocalEntryNotFoundError:  # also an incomplete snapshot (IncompleteSnapshotError)
        return None


def hub_name_error(name: str) -> str | None:
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    try:
        validate_repo_id(name)
    except HFValidationError as error:
        return str(error)
    return None


def model_path_errors(key: str, path: str, workdir: Path) -> list[str]:
    """Why the jobs could not load `path` (config key `key`): a local directory that is missing or incomplete, a
    name that is neither a directory nor a hub name, or, with HF_HUB_OFFLINE=1, a hub name the cache lacks."""
    if is_local(path, workdir):
        directory = workdir / path
        if not directory.is_dir():
            found = "is not a directory" if directory.exists() else "does not exist"
            return [f"{key}: local path {path!r} {found} (relative to the working directory "
                    f"{str(workdir)!r}); fix it, or give a hub name such as Qwen/Qwen2.5-7B"]
        missing = missing_model_files(directory)
        if missing:
            return [f"{key}: the model directory {path!r} lacks {', '.join(missing)}: verl and vLLM load a Hugging "
                    f"Face model directory — download the whole model into it (e.g. `hf download <hub name> "
                    f"--local-dir {path}`; {PREFETCH})"]
        damaged = weight_file_problems(directory)
        return [f"{key}: the model directory {path!r} holds weights verl and vLLM cannot load: {'; '.join(damaged)} "
                f"— download the whole model into it again (an interrupted download leaves such files; e.g. `hf "
                f"download <hub name> --local-dir {path}`; {PREFETCH})"] if damaged else []
    invalid = hub_name_error(path)
    if invalid:
        return [f"{key}: {path!r} is neither a local directory (relative to the working directory {str(workdir)!r}) "
                f"nor a hub name ({invalid}); give an existing model directory or a hub name such as Qwen/Qwen2.5-7B"]
    if not hub_offline():
        return []
    snapshot = cached_snapshot(path)
    if snapshot is None:
        problem = "holds no complete snapshot of it"
    elif missing_model_files(snapshot):
        problem = f"holds a snapshot of it ({snapshot}) without {', '.join(missing_model_files(snapshot))}"
    elif weight_file_problems(snapshot):
        problem = (f"holds a snapshot of it ({snapshot}) whose weights cannot be loaded: "
                   f"{'; '.join(weight_file_problems(snapshot))}")
    else:
        return []
    return [f"{key}: hub name {path!r} with HF_HUB_OFFLINE=1, but the Hugging Face cache {hub_cache()!r} {problem}, "
            f"so every train and score job would fail at start — download it there on a machine with a network "
            f"(`hf download {path} --cache-dir {hub_cache()}`), or point {key} at a local copy ({PREFETCH})"]


def model_path_notes(key: str, path: str, workdir: Path) -> list[str]:
    """The dry-run summary's line on a hub name the jobs will resolve online (none offline: refused or found)."""
    if is_local(path, workdir) or hub_name_error(path) or hub_offline():
        return []
    snapshot = cached_snapshot(path)
    if snapshot is not None and not missing_model_files(snapshot):
        return [f"{key}: hub name {path!r} is in the Hugging Face cache ({snapshot}); the jobs still ask the hub "
                f"for updates — set HF_HUB_OFFLINE=1 where the nodes have no network"]
    return [f"warning: {key}: hub name {path!r} is not in the Hugging Face cache {hub_cache()!r}: every train and "
            f"score job downloads it at start, and fails on a node without a network — pre-fetch it ({PREFETCH})"]
