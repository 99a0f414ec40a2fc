"""`python -m emissions.cli` is the operator CLI, as `python -m emissions` is."""
import sys

from emissions.cli import main

sys.exit(main())
