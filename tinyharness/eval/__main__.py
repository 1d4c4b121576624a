"""`python -m tinyharness.eval`: the same as `tinyharness eval`."""
import sys

from . import main

sys.exit(main())
