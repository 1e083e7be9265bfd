"""The ``acl.rt`` calls the simulator does not model: each answers 207000.

Kernel binaries, virtual memory, inter-process sharing, custom allocators, descriptor
copies and stream memory operations need a real device. Each call still parses its
arguments exactly as pyACL does, logs a line naming itself and returns pyACL's result
shape with ``ACL_ERROR_RT_FEATURE_NOT_SUPPORT`` (207000) as ``ret``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ._args import check_args
from ._rc import RC

__all__ = ["UNSUPPORTED", "UnsupportedCalls"]

_log = logging.getLogger("aclasync.sim")

_RET = object()  # stands for the return code in a result template

#: name -> (PyArg_ParseTuple format, result template). Templates follow pyACL's
#: Py_BuildValue calls; a template without ``_RET`` is a call that returns a bare handle.
UNSUPPORTED: dict[str, tuple[str, tuple[Any, ...] | Any]] = {
    # kernel binaries and launches
    "binary_load_from_file": ("sO", (0, _RET)),
    "binary_load_from_data": ("kkO", (0, _RET)),
    "get_function_addr": ("k", (0, 0, _RET)),
    "get_function_name": ("kI", ("", _RET)),
    "register_cpu_func": ("kss", (0, _RET)),
    "create_binary": ("kk", 0),
    "destroy_binary": ("k", _RET),
    "binary_load": ("k", (0, _RET)),
    "binary_unload": ("k", _RET),
    "binary_get_function": ("ks", (0, _RET)),
    "launch_kernel": ("kIkkk", _RET),
    "kernel_args_init": ("k", (0, _RET)),
    "kernel_args_init_by_user_mem": ("kkkk", _RET),
    "kernel_args_get_mem_size": ("kk", (0, _RET)),
    "kernel_args_get_handle_mem_size": ("k", (0, _RET)),
    "kernel_args_append": ("kkk", (0, _RET)),
    "kernel_args_append_place_holder": ("k", (0, _RET)),
    "kernel_args_get_place_holder_buffer": ("kkk", (0, _RET)),
    "kernel_args_para_update": ("kkkk", _RET),
    "kernel_args_finalize": ("k", _RET),
    "launch_kernel_with_config": ("kIkOkk", _RET),
    # virtual memory and physical handles
    "reserve_mem_address": ("kkkK", (0, _RET)),
    "release_mem_address": ("k", _RET),
    "malloc_physical": ("kOK", (0, _RET)),
    "free_physical": ("k", _RET),
    "map_mem": ("kkkkK", _RET),
    "unmap_mem": ("k", _RET),
    "mem_get_allocation_granularity": ("Oi", (0, _RET)),
    # sharing memory and notifies between processes
    "mem_export_to_shareable_handle": ("kiK", (0, _RET)),
    "mem_set_pid_to_shareable_handle": ("KO", _RET),
    "mem_import_from_shareable_handle": ("Ki", (0, _RET)),
    "ipc_mem_get_export_key": ("kkkK", ("", _RET)),
    "ipc_mem_set_import_pid": ("sO", _RET),
    "ipc_mem_import_by_key": ("sK", (0, _RET)),
    "ipc_mem_close": ("s", _RET),
    "notify_get_export_key": ("kkK", ("", _RET)),
    "notify_set_import_pid": ("kO", _RET),
    "notify_import_by_key": ("sK", (0, _RET)),
    # custom allocators
    "allocator_create_desc": ("", 0),
    "allocator_destroy_desc": ("k", _RET),
    "allocator_set_obj_to_desc": ("kk", _RET),
    "allocator_set_alloc_func_to_desc": ("kO", _RET),
    "allocator_set_free_func_to_desc": ("kO", _RET),
    "allocator_set_alloc_advise_func_to_desc": ("kO", _RET),
    "allocator_set_get_addr_from_block_func_to_desc": ("kO", _RET),
    "allocator_register": ("kk", _RET),
    "allocator_unregister": ("k", _RET),
    # descriptor copies, on-device reduction, stream memory operations
    "get_memcpy_desc_size": ("i", (0, _RET)),
    "set_memcpy_desc": ("kikkkk", (0, _RET)),
    "memcpy_async_with_desc": ("kik", _RET),
    "reduce_async": ("kkkiikk", _RET),
    "value_write": ("kkIk", _RET),
    "value_wait": ("kkIk", _RET),
}


def _fill(template: Any) -> Any:
    if template is _RET:
        return RC.FEATURE_NOT_SUPPORT
    if isinstance(template, tuple):
        return tuple(_fill(item) for item in template)
    return template


def _unsupported(name: str, fmt: str, template: Any) -> Callable[..., Any]:
    api = f"acl.rt.{name}"

    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        check_args(api, fmt, args, kwargs)
        _log.warning("%s is not supported by the simulator: returning 207000", api)
        result = _fill(template)
        if template is _RET or isinstance(template, tuple):
            self._core.record_error(RC.FEATURE_NOT_SUPPORT, api)
        return result

    call.__name__ = call.__qualname__ = name
    call.__doc__ = f"Not modelled: logs a line and returns 207000 (args parsed as ``{fmt}``)."
    call.__pyacl_api__ = api  # type: ignore[attr-defined]
    call.__pyacl_fmt__ = fmt  # type: ignore[attr-defined]
    call.__pyacl_unsupported__ = True  # type: ignore[attr-defined]
    return call


class UnsupportedCalls:
    """Mixin of the ``acl.rt`` calls that answer 207000."""

    _core: Any


for _name, (_fmt, _template) in UNSUPPORTED.items():
    setattr(UnsupportedCalls, _name, _unsupported(_name, _fmt, _template))
