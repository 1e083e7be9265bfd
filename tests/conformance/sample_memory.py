"""A pyACL program in the style of Ascend's public samples and the acllite helpers.

It only ever does ``import acl``: run it on a CANN host, or with ``acl`` resolving to
``aclasync.sim.acl`` (``tests/conformance/test_samples.py`` does that), unchanged. It
allocates host and device memory, copies numpy data in through ``numpy_to_ptr`` and
``.ctypes.data``, fills device memory with ``memset``, copies results back into a
``bytes_to_ptr`` buffer and a ``malloc_host`` block, serves a host callback on a
``start_thread`` thread, and compares everything with numpy. Exit status 0 and the line
``sample passed`` mean success.
"""

import sys

import acl
import numpy as np

# Samples define pyACL's constants themselves (acllite's constants.py does).
ACL_MEM_MALLOC_HUGE_FIRST = 0
ACL_MEMCPY_HOST_TO_DEVICE = 1
ACL_MEMCPY_DEVICE_TO_HOST = 2
ACL_MEMCPY_DEVICE_TO_DEVICE = 3
ACL_HOST = 1
ACL_CALLBACK_BLOCK = 1
ACL_ERROR = 3
NPY_FLOAT32 = 11
DEVICE_ID = 0


def check_ret(message, ret):
    """acllite's check_ret: log through acl.app_log, then raise."""
    if ret != 0:
        acl.app_log(ACL_ERROR, f"{message} failed ret={ret}")
        raise Exception(f"{message} failed ret={ret}")


class Resource:
    """acllite's AclLiteResource, reduced: init, set_device, context, stream, run mode."""

    def __init__(self, device_id):
        self.device_id = device_id
        self.context = None
        self.stream = None
        self.run_mode = None

    def init(self):
        check_ret("acl.init", acl.init())
        check_ret("acl.rt.set_device", acl.rt.set_device(self.device_id))
        self.context, ret = acl.rt.create_context(self.device_id)
        check_ret("acl.rt.create_context", ret)
        self.stream, ret = acl.rt.create_stream()
        check_ret("acl.rt.create_stream", ret)
        self.run_mode, ret = acl.rt.get_run_mode()
        check_ret("acl.rt.get_run_mode", ret)

    def release(self):
        check_ret("acl.rt.destroy_stream", acl.rt.destroy_stream(self.stream))
        check_ret("acl.rt.destroy_context", acl.rt.destroy_context(self.context))
        check_ret("acl.rt.reset_device", acl.rt.reset_device(self.device_id))
        check_ret("acl.finalize", acl.finalize())


def copy_to_device(array):
    """acllite's copy_data_host_to_device for a numpy array."""
    size = array.nbytes
    device_ptr, ret = acl.rt.malloc(size, ACL_MEM_MALLOC_HUGE_FIRST)
    check_ret("acl.rt.malloc", ret)
    host_ptr = acl.util.numpy_to_ptr(array)
    check_ret("acl.rt.memcpy", acl.rt.memcpy(device_ptr, size, host_ptr, size, 1))
    return device_ptr


def copy_data_as_numpy(device_ptr, size, dtype, shape):
    """acllite's copy_data_as_numpy: into a bytes buffer, then numpy from the bytes."""
    buffer = bytes(size)
    buffer_ptr = acl.util.bytes_to_ptr(buffer)
    ret = acl.rt.memcpy(buffer_ptr, size, device_ptr, size, ACL_MEMCPY_DEVICE_TO_HOST)
    check_ret("acl.rt.memcpy", ret)
    return np.frombuffer(buffer, dtype=dtype).reshape(shape)


def main():
    resource = Resource(DEVICE_ID)
    resource.init()
    stream = resource.stream
    assert resource.run_mode == ACL_HOST

    # 1. numpy data in through numpy_to_ptr, back through a bytes_to_ptr buffer.
    source = np.arange(1024, dtype=np.float32).reshape(32, 32)
    dev_a = copy_to_device(source)
    result = copy_data_as_numpy(dev_a, source.nbytes, np.float32, source.shape)
    assert np.array_equal(result, source), "numpy_to_ptr -> device -> bytes_to_ptr"

    # 2. .ctypes.data in, memset on the device, async copy back into a bytes buffer.
    second = np.full(4096, 3, dtype=np.uint8)
    dev_b, ret = acl.rt.malloc(second.nbytes, ACL_MEM_MALLOC_HUGE_FIRST)
    check_ret("acl.rt.malloc", ret)
    ret = acl.rt.memcpy(dev_b, second.nbytes, second.ctypes.data, second.nbytes, 1)
    check_ret("acl.rt.memcpy", ret)
    check_ret("acl.rt.memset", acl.rt.memset(dev_b, second.nbytes, 0x7F, 1024))
    ret = acl.rt.memset_async(dev_b + 1024, second.nbytes - 1024, 0x11, 1024, stream)
    check_ret("acl.rt.memset_async", ret)
    out = bytes(second.nbytes)
    ret = acl.rt.memcpy_async(acl.util.bytes_to_ptr(out), len(out), dev_b, second.nbytes, 2, stream)
    check_ret("acl.rt.memcpy_async", ret)
    check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(stream))
    expected = second.copy()
    expected[:1024] = 0x7F
    expected[1024:2048] = 0x11
    assert out == expected.tobytes(), "memset on the device, copied back into bytes"

    # 3. Pinned host memory viewed through ptr_to_numpy; a device-to-device copy.
    host_ptr, ret = acl.rt.malloc_host(source.nbytes)
    check_ret("acl.rt.malloc_host", ret)
    dev_c, ret = acl.rt.malloc(source.nbytes, ACL_MEM_MALLOC_HUGE_FIRST)
    check_ret("acl.rt.malloc", ret)
    ret = acl.rt.memcpy(dev_c, source.nbytes, dev_a, source.nbytes, ACL_MEMCPY_DEVICE_TO_DEVICE)
    check_ret("acl.rt.memcpy", ret)
    ret = acl.rt.memcpy(host_ptr, source.nbytes, dev_c, source.nbytes, 2)
    check_ret("acl.rt.memcpy", ret)
    pinned = acl.util.ptr_to_numpy(host_ptr, source.shape, NPY_FLOAT32)
    assert np.array_equal(pinned, source), "malloc_host + ptr_to_numpy"
    raw = acl.util.ptr_to_bytes(host_ptr, 16)
    assert raw == source.tobytes()[:16], "ptr_to_bytes"

    # 4. A blocking host callback served by a start_thread loop, as the samples do.
    state = {"exit": False, "seen": []}

    def process_callback(args_list):
        check_ret("acl.rt.set_context", acl.rt.set_context(resource.context))
        while not state["exit"]:
            acl.rt.process_report(100)

    def on_done(user_data):
        state["seen"].append(user_data)

    thread_id, ret = acl.util.start_thread(process_callback, [])
    check_ret("acl.util.start_thread", ret)
    check_ret("acl.rt.subscribe_report", acl.rt.subscribe_report(thread_id, stream))
    ret = acl.rt.launch_callback(on_done, "batch-1", ACL_CALLBACK_BLOCK, stream)
    check_ret("acl.rt.launch_callback", ret)
    check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(stream))
    assert state["seen"] == ["batch-1"], "the callback ran before the sync returned"
    check_ret("acl.rt.unsubscribe_report", acl.rt.unsubscribe_report(thread_id, stream))
    state["exit"] = True
    check_ret("acl.util.stop_thread", acl.util.stop_thread(thread_id))

    # 5. A bad host pointer is an error code, not a crash.
    bad = acl.rt.memcpy(dev_a, 64, 0x10, 64, ACL_MEMCPY_HOST_TO_DEVICE)
    assert bad != 0, "an unmapped host pointer is refused"

    for ptr in (dev_a, dev_b, dev_c):
        check_ret("acl.rt.free", acl.rt.free(ptr))
    check_ret("acl.rt.free_host", acl.rt.free_host(host_ptr))
    resource.release()
    print("sample passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
