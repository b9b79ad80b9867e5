"""The README is the front door (issue 53): at most 200 lines, pointing at the repository's own API page."""
from conftest import REPO


def test_the_readme_is_short_and_links_its_own_api_page():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200
    assert "](docs/api.md)" in text and "../shared/docs/api.md" not in text
    for link in ("docs/diagnosis.md", "docs/benchmarks.md"):
        assert link in text and (REPO / link).is_file()
