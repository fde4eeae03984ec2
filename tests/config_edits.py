"""Editing a study config by dotted key, as an overlay would: the tests that change one setting at a time."""


def set_key(config: dict, key: str, value) -> None:
    """Set `config`'s entry at the dotted `key` (e.g. "training.learning_rate") to `value`, creating sections."""
    *parents, leaf = key.split(".")
    section = config
    for parent in parents:
        section = section.setdefault(parent, {})
    section[leaf] = value
