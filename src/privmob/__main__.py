"""``python -m privmob`` runs the command line."""

from privmob.cli import main

main()
