"""Every output: terminal tables, Markdown, CSV/Parquet/JSON files and plots."""
