"""Knowledge services: OKF harvest judgments (``okf``), the memory outbox (``outbox``) and insight reviews (``insights``)."""

__all__: list[str] = []
