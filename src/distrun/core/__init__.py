"""Core: the words and helpers every layer of distrun uses (errors, statuses, safe file access, /proc)."""
