"""`python -m tinyharness.sandbox`: the helper that applies the sandbox and execs (see
sandbox/__init__.py)."""
import sys

from . import helper_main

sys.exit(helper_main(sys.argv[1:]))
