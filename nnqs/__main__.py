import sys

try:
    from nnqs.cli import main
except KeyboardInterrupt:  # a Ctrl-C before the command's own handling is loaded
    sys.stderr.write("nnqs: interrupted before the run started; nothing was saved\n")
    sys.exit(130)

sys.exit(main())
