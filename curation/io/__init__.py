"""One storage layer (local paths and s3://, one S3 client), atomic writes, the HTTP client, the row ledger."""
