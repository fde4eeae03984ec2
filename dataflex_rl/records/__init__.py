"""Run records: the tidy table the statistics read, the package versions beside it, and records from elsewhere."""
