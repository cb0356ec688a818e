"""Each kind of part a job works in: benchmark rows, documents, audit snippets, the doc-mia grid, the release build."""
