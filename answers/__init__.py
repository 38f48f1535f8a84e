"""Model answers, one Markdown file per question id."""
