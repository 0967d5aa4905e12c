"""services/sdk."""

__all__: list[str] = []
