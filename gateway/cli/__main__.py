"""`python -m gateway.cli`: the `memfed` command where the script is not installed."""

import sys

from gateway.cli.main import main

sys.exit(main())
