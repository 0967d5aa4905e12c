"""services/canvas."""

__all__: list[str] = []
