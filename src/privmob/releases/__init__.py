"""privmob.releases."""
