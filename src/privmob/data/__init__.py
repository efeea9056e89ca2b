"""privmob.data."""
