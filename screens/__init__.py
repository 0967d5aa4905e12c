"""screens."""

__all__: list[str] = []
