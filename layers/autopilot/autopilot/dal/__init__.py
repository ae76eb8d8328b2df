"""Data access: the StateStore protocol, the state table behind it, and an in-memory store for tests."""
