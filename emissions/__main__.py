"""`python -m emissions` is the operator CLI."""
import sys

from emissions.cli import main

sys.exit(main())
