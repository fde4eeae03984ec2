"""Reading a config: its YAML nodes, its sections as settings dataclasses, and the names a refusal suggests."""
