import sys

from spectree.cli import main

sys.exit(main())
