"""Typed modal dialogs: forms, confirmations and paged details."""

from .confirm import ConfirmDialog, wants_confirmation
from .delivery import DeliveryDialog
from .detail import DetailDialog
from .form import Field, FormDialog
from .letter import LetterDialog

__all__ = ["ConfirmDialog", "DeliveryDialog", "DetailDialog", "Field", "FormDialog", "LetterDialog", "wants_confirmation"]
