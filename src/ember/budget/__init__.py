"""Spend limits per project: a daily and a monthly cap in dollars, warned about at a share of
them and, when the user asks for it, enforced by refusing new requests (``ember.budget.stage``)."""
