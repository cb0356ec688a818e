"""Report content as strings and PNG bytes: the HTML renderer, figures, each command's page. No file writes."""
