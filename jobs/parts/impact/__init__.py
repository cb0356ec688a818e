"""`tidemark impact`: per-item results read on the plane, evidence read and joined to them, the records."""
