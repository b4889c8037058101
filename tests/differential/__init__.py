"""The validator's verdicts held against the real server."""
