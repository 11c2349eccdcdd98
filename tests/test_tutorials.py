"""Every tutorial runs as its reader would run it and prints what it shows: its commands and
Python blocks in a fresh folder, each output block set beside what was printed, each claim
asserted by a Python block on the page (``tests/tutorials.py``, which also rewrites a page's
outputs with ``--update``). The comparison's own rules are tested first."""

import pytest

from tutorials import NOTICE, TUTORIALS, TutorialFailed, blocks, compare, is_output, run_page

RUN = "100 steps, 64 tiles on 2 nodes x 1 workers (birdshot): step 26.99 ms, LIF 0.047"


def test_decimals_are_free_words_and_integers_are_not():
    assert compare(RUN, "100 steps, 64 tiles on 2 nodes x 1 workers (birdshot): step 3.10 ms, LIF 0.123")[0] == []
    for wrong in (RUN.replace("100 steps", "90 steps"), RUN.replace("64 tiles", "16 tiles"),
                  RUN.replace("birdshot", "sfc"), RUN + ", efficiency 0.36", RUN.replace("26.99", "27")):
        assert compare(RUN, wrong)[0], wrong
    assert compare("total 157.08\n", "total 157.09\n", exact=True)[0]
    assert compare("total 157.08\n", "total 157.08\n", exact=True)[0] == []


def test_an_ellipsis_is_any_text_and_an_update_keeps_it():
    shown = "84 steps; … events in 0.28 s; folder …/runs/x"
    problems, updated = compare(shown, "84 steps; 74,903 events in 0.31 s; folder /home/me/runs/x")
    assert problems == [] and updated == "84 steps; … events in 0.31 s; folder …/runs/x"
    assert compare(shown, "84 steps; 3 events in 0.3 s; folder /home/me/runs/y")[0]


def test_lines_must_be_the_same_in_number_and_order_spaces_and_rules_aside():
    assert compare("a\nb", "b\na")[0] and compare("a\nb", "a")[0] and compare("a", "a\nb")[0]
    assert compare("   title 1.5\n━━━━━ x", "title  2.25\n━━━ x\n\n")[0] == []


TABLE = """\
      ranked (3 cases)
┏━━━━━━┳━━━━━━━━━━━┳━━━━━━━┳━━━━━━━━━━━┓
┃ rank ┃ placement ┃ nodes ┃ step (ms) ┃
┡━━━━━━╇━━━━━━━━━━━╇━━━━━━━╇━━━━━━━━━━━┩
│    1 │ birdshot  │     4 │     1.432 │
│    2 │ greedy    │     4 │     1.451 │
│    3 │ sfc       │     2 │     2.645 │
└──────┴───────────┴───────┴───────────┘
wrote x.png"""


def test_table_rows_match_as_a_set_with_their_rank_free_and_nothing_else():
    birdshot, greedy = "│ birdshot  │     4 │     1.4", "│ greedy    │     4 │     1.4"
    reordered = TABLE.replace(f"│    1 {birdshot}32", f"│    2 {birdshot}92")  # slower now: second
    reordered = reordered.replace(f"│    2 {greedy}51", f"│    1 {greedy}51")
    assert compare(TABLE, reordered)[0] == []
    lines = reordered.splitlines()
    lines[5], lines[6] = lines[6], lines[5]
    problems, updated = compare(TABLE, "\n".join(lines))
    assert problems == [] and updated == "\n".join(lines)  # an update writes the order printed
    assert compare(TABLE, TABLE.replace("sfc       │     2", "sfc       │     4"))[0]  # a node count
    assert compare(TABLE, TABLE.replace("(3 cases)", "(4 cases)"))[0]
    dropped = "\n".join(line for line in TABLE.splitlines() if "greedy" not in line)
    assert compare(TABLE, dropped)[0]


def test_markers_and_output_blocks(tmp_path):
    page = """Intro.

<!-- file: heat.toml -->
```toml
steps = 1
```

```
not an output: it follows a file
```

```bash
shoal scenarios
```

```
scenarios it printed
```

Prose between.

```
a listing, not an output
```

<!-- not run: needs a cluster -->
```bash
srun shoal run x
```
"""
    toml, listing_after_file, command, output, listing, srun = blocks(page)
    assert toml.markers == {"file": "heat.toml"} and not is_output(listing_after_file)
    assert is_output(output) and output.follows is command and not is_output(listing)
    assert srun.markers == {"not run": "needs a cluster"}
    assert page[output.start:output.end] == "scenarios it printed\n"


SMALL_PAGE = """Save this:

<!-- file: tiles.py -->
```python
COUNT = 3
```

```python
from tiles import COUNT

print(f"{COUNT} tiles in 1.25 s")
```

```
4 tiles in 0.50 s
```

```python
assert COUNT == CLAIM
```
"""


def test_a_page_runs_in_one_namespace_its_saved_files_import_and_an_update_rewrites_its_outputs(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(SMALL_PAGE.replace("CLAIM", "3"))
    outcome = run_page(page, tmp_path / "work")
    assert outcome.problems == ["page.md: ```python block 'from tiles import COUNT':\n"
                                "printed: '3 tiles in 1.25 s'\n  shown: '4 tiles in 0.50 s'"]
    assert outcome.updated == page.read_text().replace("4 tiles in 0.50 s", "3 tiles in 1.25 s")
    fixed = tmp_path / "fixed.md"
    fixed.write_text(outcome.updated)
    assert run_page(fixed, tmp_path / "again").problems == []
    page.write_text(SMALL_PAGE.replace("CLAIM", "4"))
    with pytest.raises(TutorialFailed, match="AssertionError"):
        run_page(page, tmp_path / "claim")


PAGES = sorted(TUTORIALS.glob("*.md"))


def test_every_tutorial_is_run():
    assert {p.stem for p in PAGES} == {"dam-break-paraview", "replay-sweep", "writing-an-app", "sampi", "study"}


@pytest.mark.slow  # (each runs its page's commands: 5 to 16 s)
@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_the_tutorial_prints_what_it_shows_and_its_claims_hold(page, tmp_path):
    assert NOTICE in page.read_text(), f"{page.name} does not say where its numbers come from"
    outcome = run_page(page, tmp_path)
    assert not outcome.problems, f"{page.name} differs from what its commands printed " \
        f"(python tests/tutorials.py --update {page.relative_to(TUTORIALS.parents[1])} rewrites it):\n" \
        + "\n".join(outcome.problems)
