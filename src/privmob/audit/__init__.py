"""privmob.audit."""
