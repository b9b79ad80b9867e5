"""Take the README's screenshots: `python -m tests.tour --out docs`.

The browser tests that draw the main view, every view of the tour and presenter mode save their
screenshots where ATLAS_SCREENSHOTS points (a temporary folder in a plain test run, so testing
never changes the repository); this command runs just those tests with it set to --out.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TESTS = ["tests/test_browser.py::test_page_loads_with_heatmap_and_screenshot",
         "tests/test_browser_features.py::test_every_view_link_shows_its_picture_first_drawn_in_one_pass",
         "tests/test_browser_features.py::test_presenter_mode_keys_in_light_and_dark_themes",
         "tests/test_browser_follow.py::test_followers_follow_the_presenter_live_and_a_detached_one_stays_put"]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for the PNG files, e.g. docs")
    args = parser.parse_args(argv)
    os.environ["ATLAS_SCREENSHOTS"] = str(args.out.resolve())
    os.environ["ATLAS_REQUIRE_BROWSER"] = "1"            # a missing Chromium is an error here, not a skip
    os.chdir(ROOT)
    return pytest.main(["-q", "-p", "no:cacheprovider", *TESTS])


if __name__ == "__main__":
    sys.exit(main())
