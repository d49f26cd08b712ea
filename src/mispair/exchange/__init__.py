"""A person's review in another tool and back: the audit as a FiftyOne dataset's answers
(:mod:`~mispair.exchange.fiftyone_tags`), as Label Studio tasks and their annotations
(:mod:`~mispair.exchange.label_studio_tasks`, :mod:`~mispair.exchange.label_studio_answers`),
each turned into a labels file for ``mispair estimate`` and a decisions file for ``mispair
apply`` by :mod:`~mispair.exchange.judgements`."""
