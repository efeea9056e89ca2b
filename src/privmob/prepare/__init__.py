"""Preparation (non-private): tiles, trips from events, homes, unique trips, bounding."""
