import sys

from nnqs.cli import main

sys.exit(main())
