"""pyACL's vocabulary: status codes, constants and enums, shared by every layer.

A leaf package: it imports nothing from aclasync, so the simulator, the front end and
the command line can all depend on it without depending on each other.
"""
