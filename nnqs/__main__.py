import sys

from nnqs import INTERRUPTED_LOADING

try:
    from nnqs.cli import main
except KeyboardInterrupt:  # a Ctrl-C before the command's own handling is loaded
    sys.stderr.write(INTERRUPTED_LOADING + "\n")
    sys.exit(130)

sys.exit(main())
