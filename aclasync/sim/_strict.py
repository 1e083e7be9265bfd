"""A simulated runtime showing pyACL's own surface and nothing else.

``strict_view(runtime)`` builds module objects shaped like CANN's ``acl`` extension:
``acl`` with the top-level functions and the submodules ``acl.rt``, ``acl.mdl`` and
``acl.util``, each holding exactly the functions pyACL's table lists for it (those every
build has; not those behind a build flag). The functions are the simulated runtime's
own, so behaviour is unchanged; what is gone is everything pyACL lacks: ``acl.sim``,
``acl.media``'s partial model, ``util.live_threads`` and other simulator helpers. A
program that runs against it calls nothing CANN does not have.
"""

from __future__ import annotations

import types
from typing import TYPE_CHECKING, cast

from .._pyacl.surface import names

if TYPE_CHECKING:
    from .._pyacl.backend import AclBackend
    from ._runtime import SimAcl

__all__ = ["StrictAcl", "strict_view"]

_SUBMODULES = ("rt", "mdl", "util")


class StrictAcl(types.ModuleType):
    """The ``acl`` module of a strict simulated runtime (see ``aclasync.sim.create``)."""

    def __repr__(self) -> str:
        return "<module 'acl' (aclasync's simulator, strict)>"


def strict_view(runtime: SimAcl) -> AclBackend:
    """Return module objects exposing only pyACL's functions of *runtime*."""
    top = StrictAcl("acl", "pyACL, simulated by aclasync (strict: pyACL's surface only).")
    for name in names("acl"):
        setattr(top, name, getattr(runtime, name))
    for sub in _SUBMODULES:
        namespace = getattr(runtime, sub)
        module = types.ModuleType(f"acl.{sub}")
        for name in names(f"acl.{sub}"):
            setattr(module, name, getattr(namespace, name))
        setattr(top, sub, module)
    return cast("AclBackend", top)
