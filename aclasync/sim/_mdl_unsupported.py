"""The part of ``acl.mdl`` the simulator does not model: each name answers 207000.

The names are those of ``acl_mdl.h`` (``hicann/ge``, ``inc/external/acl/acl_mdl.h``) in
pyACL's spelling. A call returns ``ret = 207000`` (ACL_ERROR_RT_FEATURE_NOT_SUPPORT)
where pyACL puts ``ret`` (last), with 0 in the value slots before it; calls that return
a handle or a string in C return the null handle ``0`` or ``""``, as on failure.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._pyacl.codes import ErrorCode

__all__ = ["UNSUPPORTED", "unsupported"]

_NOT_SUPPORTED = int(ErrorCode.ACL_ERROR_RT_FEATURE_NOT_SUPPORT)

#: Unmodelled name -> how many values pyACL returns before ``ret``; ``None``: a handle
#: (0) is returned alone; ``"str"``: a string ("") is returned alone.
UNSUPPORTED: dict[str, int | str | None] = {
    **dict.fromkeys(
        (
            "bundle_destroy_query_info",
            "bundle_query_info_from_file",
            "bundle_query_info_from_mem",
            "bundle_unload",
            "bundle_unload_model",
            "create_and_get_op_desc",
            "destroy_aipp",
            "destroy_config_handle",
            "destroy_exec_config_handle",
            "execute_async_v2",
            "execute_v2",
            "set_aipp_ax_swap_switch",
            "set_aipp_by_input_index",
            "set_aipp_crop_params",
            "set_aipp_csc_params",
            "set_aipp_dtc_pixel_mean",
            "set_aipp_dtc_pixel_min",
            "set_aipp_input_format",
            "set_aipp_padding_params",
            "set_aipp_pixel_var_reci",
            "set_aipp_rbuv_swap_switch",
            "set_aipp_scf_params",
            "set_aipp_src_image_size",
            "set_attribute",
            "set_config_opt",
            "set_dataset_tensor_desc",
            "set_dynamic_hw_size",
            "set_exec_config_opt",
            "set_external_weight_address",
            "set_input_aipp",
            "set_input_dynamic_dims",
        ),
        0,
    ),
    **dict.fromkeys(
        (
            "bundle_get_model_id",
            "bundle_get_model_num",
            "bundle_get_query_model_num",
            "bundle_get_var_weight_size",
            "bundle_init_from_file",
            "bundle_init_from_mem",
            "bundle_load_from_file",
            "bundle_load_from_mem",
            "bundle_load_model",
            "bundle_load_model_with_config",
            "bundle_load_model_with_mem",
            "get_aipp_data_size",
            "get_attribute",
            "get_dynamic_hw",
            "get_first_aipp_info",
            "get_input_dims_range",
            "get_input_dims_v2",
            "get_input_dynamic_dims",
            "get_input_dynamic_gear_count",
            "load_from_file_with_mem",
            "load_from_file_with_q",
            "load_from_mem_with_mem",
            "load_from_mem_with_q",
            "load_from_model",
            "load_with_config",
            "query_exe_om_desc",
        ),
        1,
    ),
    **dict.fromkeys(("bundle_get_size", "get_aipp_type", "query_size", "query_size_from_mem"), 2),
    **dict.fromkeys(
        (
            "bundle_create_query_info",
            "create_aipp",
            "create_config_handle",
            "create_exec_config_handle",
            "get_dataset_tensor_desc",
        ),
        None,
    ),
    **dict.fromkeys(("get_op_attr", "get_tensor_real_name"), "str"),
}


def unsupported(name: str) -> Callable[..., Any]:
    """Return the stand-in for the unmodelled ``acl.mdl.<name>``."""
    shape = UNSUPPORTED[name]

    def call(*_args: Any) -> Any:
        if shape is None:
            return 0
        if shape == "str":
            return ""
        assert isinstance(shape, int)
        return _NOT_SUPPORTED if shape == 0 else (*([0] * shape), _NOT_SUPPORTED)

    call.__name__ = call.__qualname__ = name
    call.__doc__ = f"acl.mdl.{name}: not modelled by the simulator (207000)."
    return call
