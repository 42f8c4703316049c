"""The pure domain model: aggregates, events, protocol. No threads, no I/O."""
