"""pyACL's Python surface as typing protocols. Generated: do not edit by hand.

``python tools/pyacl_protocol.py`` writes this module from ``surface.json``, the table
of pyACL's functions read from its open-source wrappers (hicann/runtime, python/pyACL,
commit 134e2edb8c46); ``tests/test_pyacl_surface.py`` checks that it is current.

``AclBackend`` is the ``acl`` module as the type checker sees it: ``Device.acl`` of a
native device has this type, so a call that pyACL does not have, or a result unpacked
in the wrong shape (``stream: int = acl.rt.create_stream()``), is a type error. The
arguments are positional-only because pyACL's functions take no keyword arguments.
A function the table marks as parsing no arguments is typed as taking none (pyACL
accepts and ignores any).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import numpy as np

__all__ = ["AclBackend", "AclMdl", "AclRt", "AclUtil"]


class AclRt(Protocol):
    """``acl.rt``: 182 functions."""

    def binary_load_from_file(self, bin_path: str, py_options: Any, /) -> tuple[int, int]:
        """Wraps ``aclrtBinaryLoadFromFile``; returns ``(int, ret)``."""

    def binary_load_from_data(self, data: int, length: int, py_options: Any, /) -> tuple[int, int]:
        """Wraps ``aclrtBinaryLoadFromData``; returns ``(int, ret)``."""

    def get_function_addr(self, func_handle: int, /) -> tuple[int, int, int]:
        """Wraps ``aclrtGetFunctionAddr``; returns ``(int, int, ret)``."""

    def get_function_name(self, func_handle: int, max_len: int, /) -> tuple[str, int]:
        """Wraps ``aclrtGetFunctionName``; returns ``(str, ret)``."""

    def register_cpu_func(
        self, bin_handle: int, func_name: str, kernel_name: str, /
    ) -> tuple[int, int]:
        """Wraps ``aclrtRegisterCpuFunc``; returns ``(int, ret)``."""

    def create_binary(self, data: int, data_len: int, /) -> int:
        """Wraps ``aclrtCreateBinary``; returns ``int``."""

    def destroy_binary(self, binary: int, /) -> int:
        """Wraps ``aclrtDestroyBinary``; returns ``ret``."""

    def binary_load(self, binary: int, /) -> tuple[int, int]:
        """Wraps ``aclrtBinaryLoad``; returns ``(int, ret)``."""

    def binary_unload(self, bin_handle: int, /) -> int:
        """Wraps ``aclrtBinaryUnLoad``; returns ``ret``."""

    def binary_get_function(self, bin_handle: int, kernel_name: str, /) -> tuple[int, int]:
        """Wraps ``aclrtBinaryGetFunction``; returns ``(int, ret)``."""

    def launch_kernel(
        self, func_handle: int, block_dim: int, args_data: int, args_size: int, stream: int, /
    ) -> int:
        """Wraps ``aclrtLaunchKernel``; returns ``ret``."""

    def kernel_args_init(self, func_handle: int, /) -> tuple[int, int]:
        """Wraps ``aclrtKernelArgsInit``; returns ``(int, ret)``."""

    def kernel_args_init_by_user_mem(
        self, func_handle: int, args_handle: int, user_host_mem: int, actual_args_size: int, /
    ) -> int:
        """Wraps ``aclrtKernelArgsInitByUserMem``; returns ``ret``."""

    def kernel_args_get_mem_size(self, func_handle: int, user_args_size: int, /) -> tuple[int, int]:
        """Wraps ``aclrtKernelArgsGetMemSize``; returns ``(int, ret)``."""

    def kernel_args_get_handle_mem_size(self, func_handle: int, /) -> tuple[int, int]:
        """Wraps ``aclrtKernelArgsGetHandleMemSize``; returns ``(int, ret)``."""

    def kernel_args_append(
        self, args_handle: int, param: int, param_size: int, /
    ) -> tuple[int, int]:
        """Wraps ``aclrtKernelArgsAppend``; returns ``(int, ret)``."""

    def kernel_args_append_place_holder(self, args_handle: int, /) -> tuple[int, int]:
        """Wraps ``aclrtKernelArgsAppendPlaceHolder``; returns ``(int, ret)``."""

    def kernel_args_get_place_holder_buffer(
        self, args_handle: int, param_handle: int, data_size: int, /
    ) -> tuple[int, int]:
        """Wraps ``aclrtKernelArgsGetPlaceHolderBuffer``; returns ``(int, ret)``."""

    def kernel_args_para_update(
        self, args_handle: int, param_handle: int, param: int, param_size: int, /
    ) -> int:
        """Wraps ``aclrtKernelArgsParaUpdate``; returns ``ret``."""

    def kernel_args_finalize(self, args_handle: int, /) -> int:
        """Wraps ``aclrtKernelArgsFinalize``; returns ``ret``."""

    def launch_kernel_with_config(
        self,
        func_handle: int,
        block_dim: int,
        stream: int,
        py_cfg: Any,
        args_handle: int,
        reserve: int,
        /,
    ) -> int:
        """Wraps ``aclrtLaunchKernelWithConfig``; returns ``ret``."""

    def set_device(self, device_id: int, /) -> int:
        """Wraps ``aclrtSetDevice``; returns ``ret``."""

    def reset_device(self, device_id: int, /) -> int:
        """Wraps ``aclrtResetDevice``; returns ``ret``."""

    def reset_device_force(self, device_id: int, /) -> int:
        """Wraps ``aclrtResetDeviceForce``; returns ``ret``."""

    def get_device(self) -> tuple[int, int]:
        """Wraps ``aclrtGetDevice``; returns ``(int, ret)``."""

    def set_device_sat_mode(self, mode: int, /) -> int:
        """Wraps ``aclrtSetDeviceSatMode``; returns ``ret``."""

    def get_device_sat_mode(self) -> tuple[int, int]:
        """Wraps ``aclrtGetDeviceSatMode``; returns ``(int, ret)``."""

    def get_run_mode(self) -> tuple[int, int]:
        """Wraps ``aclrtGetRunMode``; returns ``(int, ret)``."""

    def set_ts_device(self, ts_id: int, /) -> int:
        """Wraps ``aclrtSetTsDevice``; returns ``ret``."""

    def get_device_count(self) -> tuple[int, int]:
        """Wraps ``aclrtGetDeviceCount``; returns ``(int, ret)``."""

    def create_context(self, device_id: int, /) -> tuple[int, int]:
        """Wraps ``aclrtCreateContext``; returns ``(int, ret)``."""

    def destroy_context(self, context: int, /) -> int:
        """Wraps ``aclrtDestroyContext``; returns ``ret``."""

    def set_context(self, context: int, /) -> int:
        """Wraps ``aclrtSetCurrentContext``; returns ``ret``."""

    def get_context(self) -> tuple[int, int]:
        """Wraps ``aclrtGetCurrentContext``; returns ``(int, ret)``."""

    def ctx_get_current_default_stream(self) -> tuple[int, int]:
        """Wraps ``aclrtCtxGetCurrentDefaultStream``; returns ``(int, ret)``."""

    def get_overflow_status(self, output_addr: int, output_size: int, stream: int, /) -> int:
        """Wraps ``aclrtGetOverflowStatus``; returns ``ret``."""

    def reset_overflow_status(self, stream: int, /) -> int:
        """Wraps ``aclrtResetOverflowStatus``; returns ``ret``."""

    def malloc(self, size: int, policy: int, /) -> tuple[int, int]:
        """Wraps ``aclrtMalloc``; returns ``(int, ret)``."""

    def free(self, dev_ptr: int, /) -> int:
        """Wraps ``aclrtFree``; returns ``ret``."""

    def get_mem_info(self, attr: int, /) -> tuple[int, int, int]:
        """Wraps ``aclrtGetMemInfo``; returns ``(int, int, ret)``."""

    def malloc_cached(self, size: int, policy: int, /) -> tuple[int, int]:
        """Wraps ``aclrtMallocCached``; returns ``(int, ret)``."""

    def mem_flush(self, dev_ptr: int, size: int, /) -> int:
        """Wraps ``aclrtMemFlush``; returns ``ret``."""

    def mem_invalidate(self, dev_ptr: int, size: int, /) -> int:
        """Wraps ``aclrtMemInvalidate``; returns ``ret``."""

    def malloc_host(self, size: int, /) -> tuple[int, int]:
        """Wraps ``aclrtMallocHost``; returns ``(int, ret)``."""

    def free_host(self, host_ptr: int, /) -> int:
        """Wraps ``aclrtFreeHost``; returns ``ret``."""

    def memcpy(self, dst: int, dst_max: int, src: int, count: int, memcpy_kind: int, /) -> int:
        """Wraps ``aclrtMemcpy``; returns ``ret``."""

    def memcpy_async(
        self, dst: int, dst_max: int, src: int, count: int, memcpy_kind: int, stream: int, /
    ) -> int:
        """Wraps ``aclrtMemcpyAsync``; returns ``ret``."""

    def memset(self, dev_ptr: int, max_count: int, value: int, count: int, /) -> int:
        """Wraps ``aclrtMemset``; returns ``ret``."""

    def memset_async(
        self, dev_ptr: int, max_count: int, value: int, count: int, stream: int, /
    ) -> int:
        """Wraps ``aclrtMemsetAsync``; returns ``ret``."""

    def create_stream(self) -> tuple[int, int]:
        """Wraps ``aclrtCreateStream``; returns ``(int, ret)``."""

    def create_stream_with_config(self, priority: int, flag: int, /) -> tuple[int, int]:
        """Wraps ``aclrtCreateStreamWithConfig``; returns ``(int, ret)``."""

    def destroy_stream(self, stream: int, /) -> int:
        """Wraps ``aclrtDestroyStream``; returns ``ret``."""

    def destroy_stream_force(self, stream: int, /) -> int:
        """Wraps ``aclrtDestroyStreamForce``; returns ``ret``."""

    def set_stream_overflow_switch(self, stream: int, flag: int, /) -> int:
        """Wraps ``aclrtSetStreamOverflowSwitch``; returns ``ret``."""

    def get_stream_overflow_switch(self, stream: int, /) -> tuple[int, int]:
        """Wraps ``aclrtGetStreamOverflowSwitch``; returns ``(int, ret)``."""

    def set_stream_failure_mode(self, stream: int, mode: int, /) -> int:
        """Wraps ``aclrtSetStreamFailureMode``; returns ``ret``."""

    def stream_query(self, stream: int, /) -> tuple[int, int]:
        """Wraps ``aclrtStreamQuery``; returns ``(int, ret)``."""

    def create_event(self) -> tuple[int, int]:
        """Wraps ``aclrtCreateEvent``; returns ``(int, ret)``."""

    def create_event_with_flag(self, flag: int, /) -> tuple[int, int]:
        """Wraps ``aclrtCreateEventWithFlag``; returns ``(int, ret)``."""

    def create_event_ex_with_flag(self, flag: int, /) -> tuple[int, int]:
        """Wraps ``aclrtCreateEventExWithFlag``; returns ``(int, ret)``."""

    def destroy_event(self, event: int, /) -> int:
        """Wraps ``aclrtDestroyEvent``; returns ``ret``."""

    def synchronize_stream(self, stream: int, /) -> int:
        """Wraps ``aclrtSynchronizeStream``; returns ``ret``; releases the GIL while it runs."""

    def synchronize_stream_with_timeout(self, stream: int, timeout: int, /) -> int:
        """Wraps ``aclrtSynchronizeStreamWithTimeout``;
        returns ``ret``; releases the GIL while it runs.
        """

    def process_report(self, timeout: int, /) -> int:
        """Wraps ``aclrtProcessReport``; returns ``ret``; releases the GIL while it runs."""

    def subscribe_report(self, thread_id: int, stream: int, /) -> int:
        """Wraps ``aclrtSubscribeReport``; returns ``ret``."""

    def unsubscribe_report(self, thread_id: int, stream: int, /) -> int:
        """Wraps ``aclrtUnSubscribeReport``; returns ``ret``."""

    def launch_callback(self, fn: Any, py_inputs_list: Any, block_type: int, stream: int, /) -> int:
        """Wraps ``aclrtLaunchCallback``; returns ``ret``."""

    def synchronize_device(self) -> int:
        """Wraps ``aclrtSynchronizeDevice``; returns ``ret``; releases the GIL while it runs."""

    def record_event(self, event: int, stream: int, /) -> int:
        """Wraps ``aclrtRecordEvent``; returns ``ret``."""

    def reset_event(self, event: int, stream: int, /) -> int:
        """Wraps ``aclrtResetEvent``; returns ``ret``."""

    def query_event(self, event: int, /) -> tuple[int, int]:
        """Wraps ``aclrtQueryEvent``; returns ``(int, ret)``."""

    def query_event_status(self, event: int, /) -> tuple[int, int]:
        """Wraps ``aclrtQueryEventStatus``; returns ``(int, ret)``."""

    def query_event_wait_status(self, event: int, /) -> tuple[int, int]:
        """Wraps ``aclrtQueryEventWaitStatus``; returns ``(int, ret)``."""

    def synchronize_event(self, event: int, /) -> int:
        """Wraps ``aclrtSynchronizeEvent``; returns ``ret``; releases the GIL while it runs."""

    def synchronize_event_with_timeout(self, event: int, timeout: int, /) -> int:
        """Wraps ``aclrtSynchronizeEventWithTimeout``;
        returns ``ret``; releases the GIL while it runs.
        """

    def event_elapsed_time(self, start: int, end: int, /) -> tuple[float, int]:
        """Wraps ``aclrtEventElapsedTime``; returns ``(float, ret)``."""

    def event_get_timestamp(self, event: int, /) -> tuple[int, int]:
        """Wraps ``aclrtEventGetTimestamp``; returns ``(int, ret)``."""

    def get_event_id(self, event: int, /) -> tuple[int, int]:
        """Wraps ``aclrtGetEventId``; returns ``(int, ret)``."""

    def get_event_avail_num(self) -> tuple[int, int]:
        """Wraps ``aclrtGetEventAvailNum``; returns ``(int, ret)``."""

    def stream_wait_event(self, stream: int, event: int, /) -> int:
        """Wraps ``aclrtStreamWaitEvent``; returns ``ret``; releases the GIL while it runs."""

    def stream_get_id(self, stream: int, /) -> tuple[int, int]:
        """Wraps ``aclrtStreamGetId``; returns ``(int, ret)``."""

    def get_stream_available_num(self) -> tuple[int, int]:
        """Wraps ``aclrtGetStreamAvailableNum``; returns ``(int, ret)``."""

    def set_stream_attribute(self, stream: int, stm_attr_type: int, py_value: Any, /) -> int:
        """Wraps ``aclrtSetStreamAttribute``; returns ``ret``."""

    def get_stream_attribute(
        self, stream: int, stm_attr_type: int, /
    ) -> tuple[dict[str, Any], int]:
        """Wraps ``aclrtGetStreamAttribute``; returns ``(dict, ret)``."""

    def get_thread_last_task_id(self) -> tuple[int, int]:
        """Wraps ``aclrtGetThreadLastTaskId``; returns ``(int, ret)``."""

    def reduce_async(
        self, dst: int, src: int, count: int, kind: int, type: int, stream: int, reserve: int, /
    ) -> int:
        """Wraps ``aclrtReduceAsync``; returns ``ret``."""

    def set_exception_info_callback(self, fn: Any = ..., /) -> int:
        """Wraps ``aclrtSetExceptionInfoCallback``; returns ``ret``."""

    def get_error_code_from_exception_info(self, info: int, /) -> int:
        """Wraps ``aclrtGetErrorCodeFromExceptionInfo``; returns ``int``."""

    def get_task_id_from_exception_info(self, info: int, /) -> int:
        """Wraps ``aclrtGetTaskIdFromExceptionInfo``; returns ``int``."""

    def get_stream_id_from_exception_info(self, info: int, /) -> int:
        """Wraps ``aclrtGetStreamIdFromExceptionInfo``; returns ``int``."""

    def get_thread_id_from_exception_info(self, info: int, /) -> int:
        """Wraps ``aclrtGetThreadIdFromExceptionInfo``; returns ``int``."""

    def get_device_id_from_exception_info(self, info: int, /) -> int:
        """Wraps ``aclrtGetDeviceIdFromExceptionInfo``; returns ``int``."""

    def set_op_wait_timeout(self, timeout: int, /) -> int:
        """Wraps ``aclrtSetOpWaitTimeout``; returns ``ret``."""

    def set_op_execute_time_out(self, timeout: int, /) -> int:
        """Wraps ``aclrtSetOpExecuteTimeOut``; returns ``ret``."""

    def memcpy2d(
        self, dst: int, dpitch: int, src: int, spitch: int, width: int, height: int, kind: int, /
    ) -> int:
        """Wraps ``aclrtMemcpy2d``; returns ``ret``."""

    def memcpy2d_async(
        self,
        dst: int,
        dpitch: int,
        src: int,
        spitch: int,
        width: int,
        height: int,
        kind: int,
        stream: int,
        /,
    ) -> int:
        """Wraps ``aclrtMemcpy2dAsync``; returns ``ret``."""

    def reserve_mem_address(
        self, size: int, alignment: int, expect_ptr: int, flags: int, /
    ) -> tuple[int, int]:
        """Wraps ``aclrtReserveMemAddress``; returns ``(int, ret)``."""

    def release_mem_address(self, vir_ptr: int, /) -> int:
        """Wraps ``aclrtReleaseMemAddress``; returns ``ret``."""

    def malloc_physical(self, size: int, py_prop: Any, flags: int, /) -> tuple[int, int]:
        """Wraps ``aclrtMallocPhysical``; returns ``(int, ret)``."""

    def free_physical(self, handle: int, /) -> int:
        """Wraps ``aclrtFreePhysical``; returns ``ret``."""

    def malloc_with_cfg(self, size: int, policy: int, py_cfg: Any, /) -> tuple[int, int]:
        """Wraps ``aclrtMallocWithCfg``; returns ``(int, ret)``."""

    def malloc_for_task_scheduler(self, size: int, policy: int, py_cfg: Any, /) -> tuple[int, int]:
        """Wraps ``aclrtMallocForTaskScheduler``; returns ``(int, ret)``."""

    def malloc_host_with_cfg(self, size: int, py_cfg: Any, /) -> tuple[int, int]:
        """Wraps ``aclrtMallocHostWithCfg``; returns ``(int, ret)``."""

    def map_mem(self, vir_ptr: int, size: int, offset: int, handle: int, flags: int, /) -> int:
        """Wraps ``aclrtMapMem``; returns ``ret``."""

    def unmap_mem(self, vir_ptr: int, /) -> int:
        """Wraps ``aclrtUnmapMem``; returns ``ret``."""

    def mem_export_to_shareable_handle(
        self, handle: int, handle_type: int, flags: int, /
    ) -> tuple[int, int]:
        """Wraps ``aclrtMemExportToShareableHandle``; returns ``(int, ret)``."""

    def device_get_bare_tgid(self) -> tuple[int, int]:
        """Wraps ``aclrtDeviceGetBareTgid``; returns ``(int, ret)``."""

    def mem_set_pid_to_shareable_handle(self, shareable_handle: int, pids_obj: Any, /) -> int:
        """Wraps ``aclrtMemSetPidToShareableHandle``; returns ``ret``."""

    def mem_import_from_shareable_handle(
        self, shareable_handle: int, device_id: int, /
    ) -> tuple[int, int]:
        """Wraps ``aclrtMemImportFromShareableHandle``; returns ``(int, ret)``."""

    def mem_get_allocation_granularity(self, py_prop: Any, option: int, /) -> tuple[int, int]:
        """Wraps ``aclrtMemGetAllocationGranularity``; returns ``(int, ret)``."""

    def get_device_utilization_rate(self, device_id: int, /) -> tuple[dict[str, Any], int]:
        """Wraps ``aclrtGetDeviceUtilizationRate``; returns ``(dict, ret)``."""

    def query_device_status(self, device_id: int, /) -> tuple[int, int]:
        """Wraps ``aclrtQueryDeviceStatus``; returns ``(int, ret)``."""

    def ctx_set_sys_param_opt(self, opt: int, value: int, /) -> int:
        """Wraps ``aclrtCtxSetSysParamOpt``; returns ``ret``."""

    def ctx_get_sys_param_opt(self, opt: int, /) -> tuple[int, int]:
        """Wraps ``aclrtCtxGetSysParamOpt``; returns ``(int, ret)``."""

    def set_sys_param_opt(self, opt: int, value: int, /) -> int:
        """Wraps ``aclrtSetSysParamOpt``; returns ``ret``."""

    def get_sys_param_opt(self, opt: int, /) -> tuple[int, int]:
        """Wraps ``aclrtGetSysParamOpt``; returns ``(int, ret)``."""

    def malloc_align32(self, size: int, policy: int, /) -> tuple[int, int]:
        """Wraps ``aclrtMallocAlign32``; returns ``(int, ret)``."""

    def allocator_create_desc(self) -> int:
        """Wraps ``aclrtAllocatorCreateDesc``; returns ``int``."""

    def allocator_destroy_desc(self, desc: int, /) -> int:
        """Wraps ``aclrtAllocatorDestroyDesc``; returns ``ret``."""

    def allocator_set_obj_to_desc(self, desc: int, allocator: int, /) -> int:
        """Wraps ``aclrtAllocatorSetObjToDesc``; returns ``ret``."""

    def allocator_set_alloc_func_to_desc(self, desc: int, py_func: Any, /) -> int:
        """Wraps ``aclrtAllocatorSetAllocFuncToDesc``; returns ``ret``."""

    def allocator_set_free_func_to_desc(self, desc: int, py_func: Any, /) -> int:
        """Wraps ``aclrtAllocatorSetFreeFuncToDesc``; returns ``ret``."""

    def allocator_set_alloc_advise_func_to_desc(self, desc: int, py_func: Any, /) -> int:
        """Wraps ``aclrtAllocatorSetAllocAdviseFuncToDesc``; returns ``ret``."""

    def allocator_set_get_addr_from_block_func_to_desc(self, desc: int, py_func: Any, /) -> int:
        """Wraps ``aclrtAllocatorSetGetAddrFromBlockFuncToDesc``; returns ``ret``."""

    def allocator_register(self, stream: int, desc: int, /) -> int:
        """Wraps ``aclrtAllocatorRegister``; returns ``ret``."""

    def allocator_unregister(self, stream: int, /) -> int:
        """Wraps ``aclrtAllocatorUnregister``; returns ``ret``."""

    def peek_at_last_error(self, level: int, /) -> int:
        """Wraps ``aclrtPeekAtLastError``; returns ``ret``."""

    def get_last_error(self, level: int, /) -> int:
        """Wraps ``aclrtGetLastError``; returns ``ret``."""

    def synchronize_device_with_timeout(self, timeout: int, /) -> int:
        """Wraps ``aclrtSynchronizeDeviceWithTimeout``; returns ``ret``."""

    def cmo_async(self, src: int, size: int, cmo_type: int, stream: int, /) -> int:
        """Wraps ``aclrtCmoAsync``; returns ``ret``."""

    def device_task_abort(self, device_id: int, timeout: int, /) -> int:
        """Wraps ``aclrtDeviceTaskAbort``; returns ``ret``."""

    def memcpy_async_with_condition(
        self, dst: int, dst_max: int, src: int, count: int, kind: int, stream: int, /
    ) -> int:
        """Wraps ``aclrtMemcpyAsyncWithCondition``; returns ``ret``."""

    def stream_abort(self, stream: int, /) -> int:
        """Wraps ``aclrtStreamAbort``; returns ``ret``."""

    def pointer_get_attributes(self, ptr: int, /) -> tuple[dict[str, Any], int]:
        """Wraps ``aclrtPointerGetAttributes``; returns ``(dict, ret)``."""

    def host_register(self, ptr: int, size: int, type: int, /) -> tuple[int, int]:
        """Wraps ``aclrtHostRegister``; returns ``(int, ret)``."""

    def host_unregister(self, ptr: int, /) -> int:
        """Wraps ``aclrtHostUnregister``; returns ``ret``."""

    def get_memcpy_desc_size(self, kind: int, /) -> tuple[int, int]:
        """Wraps ``aclrtGetMemcpyDescSize``; returns ``(int, ret)``."""

    def set_memcpy_desc(
        self, desc: int, kind: int, src_addr: int, dst_addr: int, count: int, config: int, /
    ) -> tuple[int, int]:
        """Wraps ``aclrtSetMemcpyDesc``; returns ``(int, ret)``."""

    def memcpy_async_with_desc(self, desc: int, kind: int, stream: int, /) -> int:
        """Wraps ``aclrtMemcpyAsyncWithDesc``; returns ``ret``."""

    def value_write(self, dev_addr: int, value: int, flag: int, stream: int, /) -> int:
        """Wraps ``aclrtValueWrite``; returns ``ret``."""

    def value_wait(self, dev_addr: int, value: int, flag: int, stream: int, /) -> int:
        """Wraps ``aclrtValueWait``; returns ``ret``."""

    def device_can_access_peer(self, device_id: int, peer_device_id: int, /) -> tuple[int, int]:
        """Wraps ``aclrtDeviceCanAccessPeer``; returns ``(int, ret)``."""

    def device_enable_peer_access(self, peer_device_id: int, flags: int, /) -> int:
        """Wraps ``aclrtDeviceEnablePeerAccess``; returns ``ret``."""

    def device_disable_peer_access(self, peer_device_id: int, /) -> int:
        """Wraps ``aclrtDeviceDisablePeerAccess``; returns ``ret``."""

    def ipc_mem_get_export_key(
        self, dev_ptr: int, size: int, len: int, flag: int, /
    ) -> tuple[str, int]:
        """Wraps ``aclrtIpcMemGetExportKey``; returns ``(str, ret)``."""

    def ipc_mem_set_import_pid(self, key: str, py_pids: Any, /) -> int:
        """Wraps ``aclrtIpcMemSetImportPid``; returns ``ret``."""

    def ipc_mem_import_by_key(self, key: str, flag: int, /) -> tuple[int, int]:
        """Wraps ``aclrtIpcMemImportByKey``; returns ``(int, ret)``."""

    def ipc_mem_close(self, key: str, /) -> int:
        """Wraps ``aclrtIpcMemClose``; returns ``ret``."""

    def get_device_info(self, device_id: int, attr: int, /) -> tuple[int, int]:
        """Wraps ``aclrtGetDeviceInfo``; returns ``(int, ret)``."""

    def device_get_stream_priority_range(self) -> tuple[int, int, int]:
        """Wraps ``aclrtDeviceGetStreamPriorityRange``; returns ``(int, int, ret)``."""

    def get_device_capability(self, device_id: int, dev_feature_type: int, /) -> tuple[int, int]:
        """Wraps ``aclrtGetDeviceCapability``; returns ``(int, ret)``."""

    def get_device_res_limit(self, device_id: int, type: int, /) -> tuple[int, int]:
        """Wraps ``aclrtGetDeviceResLimit``; returns ``(int, ret)``."""

    def set_device_res_limit(self, device_id: int, type: int, value: int, /) -> int:
        """Wraps ``aclrtSetDeviceResLimit``; returns ``ret``."""

    def reset_device_res_limit(self, device_id: int, /) -> int:
        """Wraps ``aclrtResetDeviceResLimit``; returns ``ret``."""

    def get_devices_topo(self, device_id: int, other_device_id: int, /) -> tuple[int, int]:
        """Wraps ``aclrtGetDevicesTopo``; returns ``(int, ret)``."""

    def create_notify(self, flag: int, /) -> tuple[int, int]:
        """Wraps ``aclrtCreateNotify``; returns ``(int, ret)``."""

    def destroy_notify(self, notify: int, /) -> int:
        """Wraps ``aclrtDestroyNotify``; returns ``ret``."""

    def record_notify(self, notify: int, stream: int, /) -> int:
        """Wraps ``aclrtRecordNotify``; returns ``ret``."""

    def wait_and_reset_notify(self, notify: int, stream: int, timeout: int, /) -> int:
        """Wraps ``aclrtWaitAndResetNotify``; returns ``ret``."""

    def get_notify_id(self, notify: int, /) -> tuple[int, int]:
        """Wraps ``aclrtGetNotifyId``; returns ``(int, ret)``."""

    def notify_batch_reset(self, py_notifies: Any, /) -> int:
        """Wraps ``aclrtNotifyBatchReset``; returns ``ret``."""

    def notify_get_export_key(self, notify: int, len: int, flag: int, /) -> tuple[str, int]:
        """Wraps ``aclrtNotifyGetExportKey``; returns ``(str, ret)``."""

    def notify_set_import_pid(self, notify: int, py_pids: Any, /) -> int:
        """Wraps ``aclrtNotifySetImportPid``; returns ``ret``."""

    def notify_import_by_key(self, key: str, flag: int, /) -> tuple[int, int]:
        """Wraps ``aclrtNotifyImportByKey``; returns ``(int, ret)``."""

    def get_stream_res_limit(self, stream: int, type: int, /) -> tuple[int, int]:
        """Wraps ``aclrtGetStreamResLimit``; returns ``(int, ret)``."""

    def set_stream_res_limit(self, stream: int, type: int, value: int, /) -> int:
        """Wraps ``aclrtSetStreamResLimit``; returns ``ret``."""

    def reset_stream_res_limit(self, stream: int, /) -> int:
        """Wraps ``aclrtResetStreamResLimit``; returns ``ret``."""

    def use_stream_res_in_current_thread(self, stream: int, /) -> int:
        """Wraps ``aclrtUseStreamResInCurrentThread``; returns ``ret``."""

    def unuse_stream_res_in_current_thread(self, stream: int, /) -> int:
        """Wraps ``aclrtUnuseStreamResInCurrentThread``; returns ``ret``."""

    def get_res_in_current_thread(self, type: int, /) -> tuple[int, int]:
        """Wraps ``aclrtGetResInCurrentThread``; returns ``(int, ret)``."""

    def get_primary_ctx_state(self, device_id: int, /) -> tuple[int, int, int]:
        """Wraps ``aclrtGetPrimaryCtxState``; returns ``(int, int, ret)``."""

    def get_logic_dev_id_by_user_dev_id(self, user_dev_id: int, /) -> tuple[int, int]:
        """Wraps ``aclrtGetLogicDevIdByUserDevId``; returns ``(int, ret)``."""

    def get_user_dev_id_by_logic_dev_id(self, logic_dev_id: int, /) -> tuple[int, int]:
        """Wraps ``aclrtGetUserDevIdByLogicDevId``; returns ``(int, ret)``."""

    def get_logic_dev_id_by_phy_dev_id(self, phy_dev_id: int, /) -> tuple[int, int]:
        """Wraps ``aclrtGetLogicDevIdByPhyDevId``; returns ``(int, ret)``."""

    def get_phy_dev_id_by_logic_dev_id(self, logic_dev_id: int, /) -> tuple[int, int]:
        """Wraps ``aclrtGetPhyDevIdByLogicDevId``; returns ``(int, ret)``."""

    def set_op_execute_timeout_v2(self, timeout: int, /) -> tuple[int, int]:
        """Wraps ``aclrtSetOpExecuteTimeOutV2``; returns ``(int, ret)``."""

    def get_op_timeout_interval(self) -> tuple[int, int]:
        """Wraps ``aclrtGetOpTimeOutInterval``; returns ``(int, ret)``."""

    def get_op_execute_timeout(self) -> tuple[int, int]:
        """Wraps ``aclrtGetOpExecuteTimeout``; returns ``(int, ret)``."""

    def device_get_uuid(self, device_id: int, /) -> tuple[dict[str, Any], int]:
        """Wraps ``aclrtDeviceGetUuid``; returns ``(dict, ret)``."""

    def device_peer_access_status(self, device_id: int, peer_device_id: int, /) -> tuple[int, int]:
        """Wraps ``aclrtDevicePeerAccessStatus``; returns ``(int, ret)``."""

    def host_register_v2(self, ptr: int, size: int, flag: int, /) -> int:
        """Wraps ``aclrtHostRegisterV2``; returns ``ret``."""

    def host_get_device_pointer(self, p_host: int, flag: int, /) -> tuple[int, int]:
        """Wraps ``aclrtHostGetDevicePointer``; returns ``(int, ret)``."""


class AclMdl(Protocol):
    """``acl.mdl``: 83 functions."""

    def load_from_file(self, model_path: str, /) -> tuple[int, int]:
        """Wraps ``aclmdlLoadFromFile``; returns ``(int, ret)``."""

    def unload(self, model_id: int, /) -> int:
        """Wraps ``aclmdlUnload``; returns ``ret``."""

    def query_size(self, file_name: str, /) -> tuple[int, int, int]:
        """Wraps ``aclmdlQuerySize``; returns ``(int, int, ret)``."""

    def execute(self, model_id: int, input: int, output: int, /) -> int:
        """Wraps ``aclmdlExecute``; returns ``ret``."""

    def execute_async(self, model_id: int, input: int, output: int, stream: int, /) -> int:
        """Wraps ``aclmdlExecuteAsync``; returns ``ret``."""

    def create_dataset(self) -> int:
        """Wraps ``aclmdlCreateDataset``; returns ``int``."""

    def destroy_dataset(self, dataset: int, /) -> int:
        """Wraps ``aclmdlDestroyDataset``; returns ``ret``."""

    def get_dataset_buffer(self, dataset: int, index: int, /) -> int:
        """Wraps ``aclmdlGetDatasetBuffer``; returns ``int``."""

    def get_dataset_num_buffers(self, dataset: int, /) -> int:
        """Wraps ``aclmdlGetDatasetNumBuffers``; returns ``int``."""

    def add_dataset_buffer(self, dataset: int, date_buffer: int, /) -> tuple[int, int]:
        """Wraps ``aclmdlAddDatasetBuffer``; returns ``(int, ret)``."""

    def get_output_size_by_index(self, model_desc: int, index: int, /) -> int:
        """Wraps ``aclmdlGetOutputSizeByIndex``; returns ``int``."""

    def get_num_inputs(self, model_desc: int, /) -> int:
        """Wraps ``aclmdlGetNumInputs``; returns ``int``."""

    def get_num_outputs(self, model_desc: int, /) -> int:
        """Wraps ``aclmdlGetNumOutputs``; returns ``int``."""

    def get_input_size_by_index(self, model_desc: int, index: int, /) -> int:
        """Wraps ``aclmdlGetInputSizeByIndex``; returns ``int``."""

    def create_desc(self) -> int:
        """Wraps ``aclmdlCreateDesc``; returns ``int``."""

    def get_desc(self, model_desc: int, model_id: int, /) -> int:
        """Wraps ``aclmdlGetDesc``; returns ``ret``."""

    def destroy_desc(self, model_desc: int, /) -> int:
        """Wraps ``aclmdlDestroyDesc``; returns ``ret``."""

    def load_from_mem(self, model: int, model_size: int, /) -> tuple[int, int]:
        """Wraps ``aclmdlLoadFromMem``; returns ``(int, ret)``."""

    def load_from_file_with_mem(
        self, model_path: str, work_ptr: int, work_size: int, weight_ptr: int, weight_size: int, /
    ) -> tuple[int, int]:
        """Wraps ``aclmdlLoadFromFileWithMem``; returns ``(int, ret)``."""

    def load_from_mem_with_mem(
        self,
        model: int,
        model_size: int,
        work_ptr: int,
        work_size: int,
        weight_ptr: int,
        weight_size: int,
        /,
    ) -> tuple[int, int]:
        """Wraps ``aclmdlLoadFromMemWithMem``; returns ``(int, ret)``."""

    def query_size_from_mem(self, model: int, model_size: int, /) -> tuple[int, int, int]:
        """Wraps ``aclmdlQuerySizeFromMem``; returns ``(int, int, ret)``."""

    def set_dynamic_batch_size(
        self, model_id: int, dataset: int, index: int, batch_size: int, /
    ) -> int:
        """Wraps ``aclmdlSetDynamicBatchSize``; returns ``ret``."""

    def set_dynamic_hw_size(
        self, model_id: int, dataset: int, index: int, height: int, width: int, /
    ) -> int:
        """Wraps ``aclmdlSetDynamicHWSize``; returns ``ret``."""

    def get_cur_output_dims(self, model_desc: int, index: int, /) -> tuple[dict[str, Any], int]:
        """Wraps ``aclmdlGetCurOutputDims``; returns ``(dict, ret)``."""

    def get_first_aipp_info(
        self, model_id: int, index: int, /
    ) -> tuple[dict[str, Any] | None, int]:
        """Wraps ``aclmdlGetFirstAippInfo``; returns ``(dict | None, ret)``."""

    def create_aipp(self, batch_size: int, /) -> int:
        """Wraps ``aclmdlCreateAIPP``; returns ``int``."""

    def destroy_aipp(self, aipp_parms_set: int, /) -> int:
        """Wraps ``aclmdlDestroyAIPP``; returns ``ret``."""

    def get_input_dims(self, model_desc: int, index: int, /) -> tuple[dict[str, Any], int]:
        """Wraps ``aclmdlGetInputDims``; returns ``(dict, ret)``."""

    def get_input_dims_v2(self, model_desc: int, index: int, /) -> tuple[dict[str, Any], int]:
        """Wraps ``aclmdlGetInputDimsV2``; returns ``(dict, ret)``."""

    def get_output_dims(self, model_desc: int, index: int, /) -> tuple[dict[str, Any], int]:
        """Wraps ``aclmdlGetOutputDims``; returns ``(dict, ret)``."""

    def get_input_name_by_index(self, model_desc: int, index: int, /) -> str | None:
        """Wraps ``aclmdlGetInputNameByIndex``; returns ``str | None``."""

    def get_output_name_by_index(self, model_desc: int, index: int, /) -> str | None:
        """Wraps ``aclmdlGetOutputNameByIndex``; returns ``str | None``."""

    def get_input_format(self, model_desc: int, index: int, /) -> int:
        """Wraps ``aclmdlGetInputFormat``; returns ``int``."""

    def get_output_format(self, model_desc: int, index: int, /) -> int:
        """Wraps ``aclmdlGetOutputFormat``; returns ``int``."""

    def get_input_data_type(self, model_desc: int, index: int, /) -> int:
        """Wraps ``aclmdlGetInputDataType``; returns ``int``."""

    def get_output_data_type(self, model_desc: int, index: int, /) -> int:
        """Wraps ``aclmdlGetOutputDataType``; returns ``int``."""

    def get_input_index_by_name(self, model_desc: int, name: str, /) -> tuple[int, int]:
        """Wraps ``aclmdlGetInputIndexByName``; returns ``(int, ret)``."""

    def get_output_index_by_name(self, model_desc: int, name: str, /) -> tuple[int, int]:
        """Wraps ``aclmdlGetOutputIndexByName``; returns ``(int, ret)``."""

    def get_dynamic_batch(self, model_desc: int, /) -> tuple[dict[str, Any], int]:
        """Wraps ``aclmdlGetDynamicBatch``; returns ``(dict, ret)``."""

    def get_dynamic_hw(self, model_desc: int, index: int, /) -> tuple[dict[str, Any], int]:
        """Wraps ``aclmdlGetDynamicHW``; returns ``(dict, ret)``."""

    def set_aipp_input_format(self, aipp_parms_set: int, input_format: int, /) -> int:
        """Wraps ``aclmdlSetAIPPInputFormat``; returns ``ret``."""

    def set_aipp_csc_params(
        self,
        aipp_parms_set: int,
        csc_switch: int,
        csc_matrix_r0_c0: int,
        csc_matrix_r0_c1: int,
        csc_matrix_r0_c2: int,
        csc_matrix_r1_c0: int,
        csc_matrix_r1_c1: int,
        csc_matrix_r1_c2: int,
        csc_matrix_r2_c0: int,
        csc_matrix_r2_c1: int,
        csc_matrix_r2_c2: int,
        csc_output_bias_r0: int,
        csc_output_bias_r1: int,
        csc_output_bias_r2: int,
        csc_input_bias_r0: int,
        csc_input_bias_r1: int,
        csc_input_bias_r2: int,
        /,
    ) -> int:
        """Wraps ``aclmdlSetAIPPCscParams``; returns ``ret``."""

    def set_aipp_rbuv_swap_switch(self, aipp_parms_set: int, rbuv_swap_switch: int, /) -> int:
        """Wraps ``aclmdlSetAIPPRbuvSwapSwitch``; returns ``ret``."""

    def set_aipp_ax_swap_switch(self, aipp_parms_set: int, rbuv_swap_switch: int, /) -> int:
        """Wraps ``aclmdlSetAIPPAxSwapSwitch``; returns ``ret``."""

    def set_aipp_src_image_size(
        self, aipp_parms_set: int, src_image_size_w: int, src_image_size_h: int, /
    ) -> int:
        """Wraps ``aclmdlSetAIPPSrcImageSize``; returns ``ret``."""

    def set_aipp_crop_params(
        self,
        aipp_parms_set: int,
        crop_switch: int,
        crop_start_pos_w: int,
        crop_start_pos_h: int,
        crop_size_w: int,
        crop_size_h: int,
        batch_index: int,
        /,
    ) -> int:
        """Wraps ``aclmdlSetAIPPCropParams``; returns ``ret``."""

    def set_aipp_padding_params(
        self,
        aipp_parms_set: int,
        padding_switch: int,
        padding_size_top: int,
        padding_size_bottom: int,
        padding_size_left: int,
        padding_size_right: int,
        batch_index: int,
        /,
    ) -> int:
        """Wraps ``aclmdlSetAIPPPaddingParams``; returns ``ret``."""

    def set_aipp_dtc_pixel_mean(
        self,
        aipp_parms_set: int,
        dtc_pixel_mean_chn0: int,
        dtc_pixel_mean_chn1: int,
        dtc_pixel_mean_chn2: int,
        dtc_pixel_mean_chn3: int,
        batch_index: int,
        /,
    ) -> int:
        """Wraps ``aclmdlSetAIPPDtcPixelMean``; returns ``ret``."""

    def set_aipp_dtc_pixel_min(
        self,
        aipp_parms_set: int,
        dtc_pixel_min_chn0: float,
        dtc_pixel_min_chn1: float,
        dtc_pixel_min_chn2: float,
        dtc_pixel_min_chn3: float,
        batch_index: int,
        /,
    ) -> int:
        """Wraps ``aclmdlSetAIPPDtcPixelMin``; returns ``ret``."""

    def set_aipp_pixel_var_reci(
        self,
        aipp_parms_set: int,
        dtc_pixel_var_reci_chn0: float,
        dtc_pixel_var_reci_chn1: float,
        dtc_pixel_var_reci_chn2: float,
        dtc_pixel_var_reci_chn3: float,
        batch_index: int,
        /,
    ) -> int:
        """Wraps ``aclmdlSetAIPPPixelVarReci``; returns ``ret``."""

    def set_input_aipp(
        self, model_id: int, dataset: int, index: int, aipp_parms_set: int, /
    ) -> int:
        """Wraps ``aclmdlSetInputAIPP``; returns ``ret``."""

    def set_input_dynamic_dims(
        self, model_id: int, dataset: int, index: int, p_dict: Any, /
    ) -> int:
        """Wraps ``aclmdlSetInputDynamicDims``; returns ``ret``."""

    def get_input_dynamic_gear_count(self, model_desc: int, index: int, /) -> tuple[int, int]:
        """Wraps ``aclmdlGetInputDynamicGearCount``; returns ``(int, ret)``."""

    def get_input_dynamic_dims(
        self, model_desc: int, index: int, gear_count: int, /
    ) -> tuple[list[Any] | None, int]:
        """Wraps ``aclmdlGetInputDynamicDims``; returns ``(list | None, ret)``."""

    def create_and_get_op_desc(
        self, device_id: int, stream_id: int, task_id: int, op_name_len: int, /
    ) -> tuple[str, int, int, int, int, int]:
        """Wraps ``aclmdlCreateAndGetOpDesc``; returns ``(str, int, int, int, int, ret)``."""

    def init_dump(self) -> int:
        """Wraps ``aclmdlInitDump``; returns ``ret``."""

    def finalize_dump(self) -> int:
        """Wraps ``aclmdlFinalizeDump``; returns ``ret``."""

    def get_aipp_type(self, model_id: int, index: int, /) -> tuple[int, int, int]:
        """Wraps ``aclmdlGetAippType``; returns ``(int, int, ret)``."""

    def set_aipp_by_input_index(
        self, model_id: int, dataset: int, index: int, aipp_parms_set: int, /
    ) -> int:
        """Wraps ``aclmdlSetAIPPByInputIndex``; returns ``ret``."""

    def set_dump(self, dump_cfg_path: str = ..., /) -> int:
        """Wraps ``aclmdlSetDump``; returns ``ret``."""

    def dump_reg_callback(self, py_func: Any, flag: int, /) -> int:
        """Wraps ``acldumpRegCallback``; returns ``ret``."""

    def dump_unreg_callback(self) -> None:
        """Wraps ``acldumpUnregCallback``; returns ``None``."""

    def load_with_config(self, handle: int, /) -> tuple[int, int]:
        """Wraps ``aclmdlLoadWithConfig``; returns ``(int, ret)``."""

    def create_config_handle(self) -> int:
        """Wraps ``aclmdlCreateConfigHandle``; returns ``int``."""

    def destroy_config_handle(self, handle: int, /) -> int:
        """Wraps ``aclmdlDestroyConfigHandle``; returns ``ret``."""

    def set_config_opt(self, handle: int, attr: int, param: Any, /) -> int:
        """Wraps ``aclmdlSetConfigOpt``; returns ``ret``."""

    def get_tensor_real_name(self, model_desc: int, name: str, /) -> str | None:
        """Wraps ``aclmdlGetTensorRealName``; returns ``str | None``."""

    def set_dataset_tensor_desc(
        self, dataset: int, tensor_desc: int, index: int, /
    ) -> tuple[int, int]:
        """Wraps ``aclmdlSetDatasetTensorDesc``; returns ``(int, ret)``."""

    def get_dataset_tensor_desc(self, dataset: int, index: int, /) -> int:
        """Wraps ``aclmdlGetDatasetTensorDesc``; returns ``int``."""

    def get_op_attr(self, model_desc: int, op_name: str, attr: str, /) -> str | None:
        """Wraps ``aclmdlGetOpAttr``; returns ``str | None``."""

    def get_aipp_data_size(self, batch_size: int, /) -> tuple[int, int]:
        """Wraps ``aclmdlGetAippDataSize``; returns ``(int, ret)``."""

    def create_exec_config_handle(self) -> int:
        """Wraps ``aclmdlCreateExecConfigHandle``; returns ``int``."""

    def destroy_exec_config_handle(self, handle: int, /) -> int:
        """Wraps ``aclmdlDestroyExecConfigHandle``; returns ``ret``."""

    def set_exec_config_opt(self, handle: int, attr: int, attr_value: int, /) -> int:
        """Wraps ``aclmdlSetExecConfigOpt``; returns ``ret``."""

    def execute_v2(
        self, model_id: int, input: int, output: int, stream: int, handle: int, /
    ) -> int:
        """Wraps ``aclmdlExecuteV2``; returns ``ret``."""

    def get_desc_from_file(self, model_desc: int, model_path: str, /) -> int:
        """Wraps ``aclmdlGetDescFromFile``; returns ``ret``."""

    def get_desc_from_mem(self, model_desc: int, model: int, model_size: int, /) -> int:
        """Wraps ``aclmdlGetDescFromMem``; returns ``ret``."""

    def get_input_dims_range(self, model_desc: int, index: int, /) -> tuple[dict[str, Any], int]:
        """Wraps ``aclmdlGetInputDimsRange``; returns ``(dict, ret)``."""

    def bundle_load_from_file(self, model_path: str, /) -> tuple[int, int]:
        """Wraps ``aclmdlBundleLoadFromFile``; returns ``(int, ret)``."""

    def bundle_load_from_mem(self, model: int, model_size: int, /) -> tuple[int, int]:
        """Wraps ``aclmdlBundleLoadFromMem``; returns ``(int, ret)``."""

    def bundle_unload(self, bundle_id: int, /) -> int:
        """Wraps ``aclmdlBundleUnload``; returns ``ret``."""

    def bundle_get_model_id(self, bundle_id: int, index: int, /) -> tuple[int, int]:
        """Wraps ``aclmdlBundleGetModelId``; returns ``(int, ret)``."""

    def bundle_get_model_num(self, bundle_id: int, /) -> tuple[int, int]:
        """Wraps ``aclmdlBundleGetModelNum``; returns ``(int, ret)``."""


class AclUtil(Protocol):
    """``acl.util``: 7 functions."""

    def numpy_to_ptr(self, in_arg: Any, /) -> int:
        """A helper of pyACL's own (no ACL call); returns ``int``."""

    def numpy_contiguous_to_ptr(self, in_arg: Any, /) -> tuple[int, np.ndarray[Any, Any]]:
        """A helper of pyACL's own (no ACL call); returns ``(int, ndarray)``."""

    def ptr_to_numpy(
        self, ptr: int, py_inputs_tuple: Any, data_type: int, /
    ) -> np.ndarray[Any, Any]:
        """A helper of pyACL's own (no ACL call); returns ``ndarray``."""

    def bytes_to_ptr(self, in_bytes: Any, /) -> int:
        """A helper of pyACL's own (no ACL call); returns ``int``."""

    def ptr_to_bytes(self, ptr: int, size: int, /) -> bytes:
        """A helper of pyACL's own (no ACL call); returns ``bytes``."""

    def start_thread(self, py_func: Any, py_func_args: Any, /) -> tuple[int, int]:
        """A helper of pyACL's own (no ACL call);
        returns ``(int, int)``; releases the GIL while it runs.
        """

    def stop_thread(self, thr_id: int, /) -> int:
        """A helper of pyACL's own (no ACL call);
        returns ``int``; releases the GIL while it runs.
        """


class AclBackend(Protocol):
    """``acl``: its 47 functions and the submodules above."""

    @property
    def rt(self) -> AclRt:
        """``acl.rt``: devices, contexts, streams, events, memory and callbacks."""

    @property
    def mdl(self) -> AclMdl:
        """``acl.mdl``: offline models, their descriptions and datasets."""

    @property
    def util(self) -> AclUtil:
        """``acl.util``: host pointers of Python data, and raw threads."""

    def init(self, path: str = ..., /) -> int:
        """Wraps ``aclInit``; returns ``ret``."""

    def finalize(self) -> int:
        """Wraps ``aclFinalize``; returns ``ret``."""

    def get_version(self) -> tuple[int, int, int, int]:
        """Wraps ``aclrtGetVersion``; returns ``(int, int, int, ret)``."""

    def get_soc_name(self) -> str | None:
        """Wraps ``aclrtGetSocName``; returns ``str | None``."""

    def float16_to_float(self, value: int, /) -> float:
        """Wraps ``aclFloat16ToFloat``; returns ``float``."""

    def float_to_float16(self, value: float, /) -> int:
        """Wraps ``aclFloatToFloat16``; returns ``int``."""

    def create_data_buffer(self, data: int, size: int, /) -> int:
        """Wraps ``aclCreateDataBuffer``; returns ``int``."""

    def destroy_data_buffer(self, data_buffer: int, /) -> int:
        """Wraps ``aclDestroyDataBuffer``; returns ``ret``."""

    def get_data_buffer_addr(self, data_buffer: int, /) -> int:
        """Wraps ``aclGetDataBufferAddr``; returns ``int``."""

    def get_data_buffer_size(self, data_buffer: int, /) -> int:
        """Wraps ``aclGetDataBufferSize``; returns ``int``."""

    def get_data_buffer_size_v2(self, data_buffer: int, /) -> int:
        """Wraps ``aclGetDataBufferSizeV2``; returns ``int``."""

    def update_data_buffer(self, data_buffer: int, data: int, size: int, /) -> int:
        """Wraps ``aclUpdateDataBuffer``; returns ``ret``."""

    def data_type_size(self, data_type: int, /) -> int:
        """Wraps ``aclDataTypeSize``; returns ``int``."""

    def create_tensor_desc(self, data_type: int, py_dims_list: Any, format: int, /) -> int:
        """Wraps ``aclCreateTensorDesc``; returns ``int``."""

    def destroy_tensor_desc(self, desc: int, /) -> None:
        """Wraps ``aclDestroyTensorDesc``; returns ``None``."""

    def get_tensor_desc_type(self, desc: int, /) -> int:
        """Wraps ``aclGetTensorDescType``; returns ``int``."""

    def get_tensor_desc_format(self, desc: int, /) -> int:
        """Wraps ``aclGetTensorDescFormat``; returns ``int``."""

    def get_tensor_desc_size(self, desc: int, /) -> int:
        """Wraps ``aclGetTensorDescSize``; returns ``int``."""

    def get_tensor_desc_element_count(self, desc: int, /) -> int:
        """Wraps ``aclGetTensorDescElementCount``; returns ``int``."""

    def get_tensor_desc_num_dims(self, desc: int, /) -> int:
        """Wraps ``aclGetTensorDescNumDims``; returns ``int``."""

    def get_tensor_desc_dim(self, desc: int, index: int, /) -> int:
        """Wraps ``aclGetTensorDescDim``; returns ``int``."""

    def get_tensor_desc_name(self, desc: int, /) -> str | None:
        """Wraps ``aclGetTensorDescName``; returns ``str | None``."""

    def set_tensor_desc_name(self, desc: int, name: str, /) -> None:
        """Wraps ``aclSetTensorDescName``; returns ``None``."""

    def trans_tensor_desc_format(self, src_desc: int, format: int, /) -> tuple[int, int]:
        """Wraps ``aclTransTensorDescFormat``; returns ``(int, ret)``."""

    def app_log(self, log_level: int, fmt: str, /) -> None:
        """A helper of pyACL's own (no ACL call); returns ``None``."""

    def set_tensor_storage_format(self, tensor_desc: int, format: int, /) -> int:
        """Wraps ``aclSetTensorStorageFormat``; returns ``ret``."""

    def set_tensor_storage_shape(self, tensor_desc: int, dims_list: Any, /) -> int:
        """Wraps ``aclSetTensorStorageShape``; returns ``ret``."""

    def set_tensor_format(self, tensor_desc: int, format: int, /) -> int:
        """Wraps ``aclSetTensorFormat``; returns ``ret``."""

    def set_tensor_shape(self, tensor_desc: int, dims_list: Any, /) -> int:
        """Wraps ``aclSetTensorShape``; returns ``ret``."""

    def set_tensor_origin_format(self, tensor_desc: int, format: int, /) -> int:
        """Wraps ``aclSetTensorOriginFormat``; returns ``ret``."""

    def set_tensor_dynamic_input(self, tensor_desc: int, dynamic_input_name: str, /) -> int:
        """Wraps ``aclSetTensorDynamicInput``; returns ``ret``."""

    def set_tensor_origin_shape(self, tensor_desc: int, dims_list: Any, /) -> int:
        """Wraps ``aclSetTensorOriginShape``; returns ``ret``."""

    def set_tensor_shape_range(self, tensor_desc: int, dims_list: Any, /) -> int:
        """Wraps ``aclSetTensorShapeRange``; returns ``ret``."""

    def get_tensor_desc_address(self, tensor_desc: int, /) -> int:
        """Wraps ``aclGetTensorDescAddress``; returns ``int``."""

    def get_tensor_desc_by_index(self, tensor_desc: int, index: int, /) -> int:
        """Wraps ``aclGetTensorDescByIndex``; returns ``int``."""

    def get_tensor_desc_dim_range(
        self, tensor_desc: int, index: int, dim_range_num: int, /
    ) -> tuple[list[Any] | None, int]:
        """Wraps ``aclGetTensorDescDimRange``; returns ``(list | None, ret)``."""

    def get_tensor_desc_dim_v2(self, desc: int, index: int, /) -> tuple[int, int]:
        """Wraps ``aclGetTensorDescDimV2``; returns ``(int, ret)``."""

    def set_tensor_place_ment(self, desc: int, mem_type: int, /) -> int:
        """Wraps ``aclSetTensorPlaceMent``; returns ``ret``."""

    def get_recent_err_msg(self) -> str | None:
        """Wraps ``aclGetRecentErrMsg``; returns ``str | None``."""

    def set_tensor_const(self, desc: int, data: int, size: int, /) -> int:
        """Wraps ``aclSetTensorConst``; returns ``ret``."""

    def set_tensor_value_range(self, desc: int, value_range_obj: Any, /) -> int:
        """Wraps ``aclSetTensorValueRange``; returns ``ret``."""

    def get_cann_attribute_list(self) -> tuple[list[Any], int, int]:
        """Wraps ``aclGetCannAttributeList``; returns ``(list, int, ret)``."""

    def get_cann_attribute(self, cann_attr: int, /) -> tuple[int, int]:
        """Wraps ``aclGetCannAttribute``; returns ``(int, ret)``."""

    def get_device_capability(self, device_id: int, device_info: int, /) -> tuple[int, int]:
        """Wraps ``aclGetDeviceCapability``; returns ``(int, ret)``."""

    def get_cann_version(self, name: int, /) -> tuple[dict[str, Any], int]:
        """Wraps ``aclsysGetCANNVersion``; returns ``(dict, ret)``."""

    def finalize_reference(self) -> tuple[int, int]:
        """Wraps ``aclFinalizeReference``; returns ``(int, ret)``."""

    def get_version_str(self, pkg_name: str, /) -> tuple[str, int]:
        """Wraps ``aclsysGetVersionStr``; returns ``(str, ret)``."""
