"""``python -m mltk`` runs the command line (the same as the ``mltk`` script)."""

from mltk.cli import main

if __name__ == "__main__":
    main()
