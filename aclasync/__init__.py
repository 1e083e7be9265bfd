"""aclasync."""
