"""Pure projections of the event log, one module per domain."""
