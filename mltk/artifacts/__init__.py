"""The only reader and writer of mltk artifacts.

An artifact is a directory with data files and ``manifest.json``. Writes are atomic: the directory is built
under a hidden ``.NAME.partial`` sibling, the manifest is written last, and the directory is renamed into
place, so an interrupted run never leaves something that looks complete. Stages that resume (shards,
training state) keep their partial directory between runs and pick up what is already there.
"""

from mltk.artifacts.manifest import *  # noqa: F401,F403
from mltk.artifacts.writer import *  # noqa: F401,F403
from mltk.artifacts.tables import *  # noqa: F401,F403
from mltk.artifacts.files import *  # noqa: F401,F403
