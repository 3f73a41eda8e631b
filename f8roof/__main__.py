"""`python -m f8roof`: the CLI, for trees used in place (PYTHONPATH=.) as on the GPU machine."""

from f8roof.cli import main

main()
