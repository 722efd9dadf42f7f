import sys

from determined.cli.main import main

sys.exit(main())
