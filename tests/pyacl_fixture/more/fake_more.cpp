// Invented acl.mdl, acl.util and acl.extra wrappers (fixture).
#include "fake_more.h"

PyObject* WrapOpenModel(PyObject* /* self */, PyObject* args)
{
    const char* modelPath = nullptr;
    uint32_t modelId = 0;
    CHECK_NULL(PyArg_ParseTuple(args, "s", &modelPath), "acl.mdl.open_model args parse failed");
    aclError ret = aclmdlOpenModel(modelPath, &modelId);
    return Py_BuildValue("Ii", modelId, ret);
}

PyObject* WrapCopyOut(PyObject* /* self */, PyObject* args)
{
    void* ptr = nullptr;
    size_t size = 0;
    PyObject* bytesObj = nullptr;
    CHECK_NULL(PyArg_ParseTuple(args, "kk", &ptr, &size), "acl.util.copy_out args parse failed");
    bytesObj = PyBytes_FromStringAndSize(reinterpret_cast<const char*>(ptr), size);
    return bytesObj;
}

PyObject* WrapPinArray(PyObject* /* self */, PyObject* args)
{
    PyObject* inArg = nullptr;
    CHECK_NULL(PyArg_ParseTuple(args, "O", &inArg), "acl.util.pin_array args parse failed");
    PyArrayObject* pinned = PyArray_GETCONTIGUOUS(reinterpret_cast<PyArrayObject*>(inArg));
    return Py_BuildValue("kO", reinterpret_cast<uintptr_t>(PyArray_BYTES(pinned)), pinned);
}

PyObject* WrapExtraThing(PyObject* /* self */, PyObject* /* args */)
{
    return Py_BuildValue("i", 0);
}

namespace {
PyMethodDef g_fakeMdl[] = {
    {"open_model", WrapOpenModel, METH_VARARGS, "open"},
    {nullptr, nullptr, 0, nullptr}};

PyMethodDef g_fakeUtil[] = {
    {"copy_out", WrapCopyOut, METH_VARARGS, "copy"},
    {"pin_array", WrapPinArray, METH_VARARGS, "pin"},
    {"not_defined_here", WrapSomewhereElse, METH_VARARGS, "defined in a file not read"},
    {nullptr, nullptr, 0, nullptr}};

PyMethodDef g_extra[] = {
    {"extra_thing", WrapExtraThing, METH_VARARGS, "extra"},
    {nullptr, nullptr, 0, nullptr}};
} // namespace

PyMethodDef* GetFakeMdlMethods() { return g_fakeMdl; }
PyMethodDef* GetFakeUtilMethods() { return g_fakeUtil; }
PyMethodDef* GetExtraMethods() { return g_extra; }
