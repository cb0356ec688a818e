"""`tidemark cutoff`: dated rows staged on the workers, their scores joined with their dates."""
