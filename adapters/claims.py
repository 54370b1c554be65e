"""Delivery claims: the one thing adapters need from the database directly.

Slack re-delivers an event it thinks was lost, and several replicas may receive the same
event; the first to claim its id handles it. The stores implement this protocol
structurally; adapters are given an object that satisfies it, never the whole store.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

__all__ = ["DeliveryClaims"]


@runtime_checkable
class DeliveryClaims(Protocol):
    """First-claimer-wins de-duplication of platform events, shared by every replica."""

    async def claim_event(self, event_id: str, ttl: float = 86400) -> bool:
        """True for the first claimer of a platform event id within ``ttl`` seconds."""
