"""privmob.evaluate."""
