"""privmob.engine."""
