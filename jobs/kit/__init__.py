"""What every driver shares: outputs and identity, which Ray to join, one logger, redaction, served models, and
the writers that put scoring's content into OUT."""
