"""privmob.prepare."""
