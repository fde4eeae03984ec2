"""The study: its config resolved once, every file its jobs read and write, and what the dry run checks and plans."""
