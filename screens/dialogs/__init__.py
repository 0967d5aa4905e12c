"""Typed modal dialogs: forms, confirmations and paged details."""

from .confirm import ConfirmDialog, wants_confirmation
from .detail import DetailDialog
from .form import Field, FormDialog

__all__ = ["ConfirmDialog", "DetailDialog", "Field", "FormDialog", "wants_confirmation"]
