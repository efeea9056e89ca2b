"""``python -m privmob`` runs the command line (as the ``privmob`` script does)."""

from privmob.cli.entry import main

main()
