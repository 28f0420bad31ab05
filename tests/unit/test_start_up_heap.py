"""A started server freezes what start-up made (cli/serve.py `freeze_start_up`): full collections
then walk only what calls and caches make, not the ~150k objects of modules and wiring that
live as long as the process."""

from __future__ import annotations

import gc

from episodic.cli.serve import freeze_start_up


def test_what_start_up_made_is_out_of_the_collectors_walks_and_what_comes_after_is_not() -> None:
    try:
        freeze_start_up()
        frozen = gc.get_freeze_count()
        made_later: list[list[int]] = [[] for _ in range(10)]
        assert frozen > 10_000  # this test process's modules and their objects
        young = gc.get_objects(generation=0)  # collected as before
        assert gc.get_freeze_count() == frozen and all(any(y is x for y in young) for x in made_later)
    finally:
        gc.unfreeze()
