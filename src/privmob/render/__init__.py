"""privmob.render."""
