"""Mechanisms, privacy costs, composition and the ledger."""
