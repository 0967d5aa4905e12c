"""services/cloud."""

__all__: list[str] = []
