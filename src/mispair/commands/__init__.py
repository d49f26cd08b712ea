"""The command line's verbs that live in modules of their own: each module has
``add_parsers(sub)``, called from :func:`mispair.cli.build_parser`, which adds its verbs with
their handlers (``set_defaults(run=...)``)."""
