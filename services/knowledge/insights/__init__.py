"""Insight reviews: proposed user-derived principles, approved into canvas documents by the operator.

``InsightReviews.open(root, canvas, changes=...)`` keeps the queue under ``<root>/insights``;
``propose`` / ``submit_markdown`` queue a ``Proposal`` (the capture template: destination,
visibility, source, candidate truths); ``approve`` writes the chosen, optionally edited truth
under its owner and links it from the listener's ``Approved insights``; ``reject`` records why.
"""

from .proposal import Proposal, ProposalError, parse_proposal, rules_for_visibility
from .reviews import InsightReview, InsightReviews, ReviewError, ReviewStateError

__all__ = [
    "InsightReviews",
    "InsightReview",
    "Proposal",
    "ProposalError",
    "ReviewError",
    "ReviewStateError",
    "parse_proposal",
    "rules_for_visibility",
]
