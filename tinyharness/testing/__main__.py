"""`python -m tinyharness.testing`: the scripted model server until Ctrl-C (see
testing/__init__.py)."""
import sys

from . import main

sys.exit(main())
