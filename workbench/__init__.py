"""workbench."""

__all__: list[str] = []
