/* Invented acl.rt wrappers (fixture). A commented-out parse must not count:
   PyArg_ParseTuple(args, "zzz", &a, &b, &c) */
#include "fake_rt.h"

PyObject* WrapMakeThing(PyObject* /* self */, PyObject* args)
{
    uint32_t sizeHint = 0;
    int32_t kind = 0;
    void* thing = nullptr;

    CHECK_NULL(
        PyArg_ParseTuple(args, "Ii", &sizeHint, &kind),
        "acl.rt.make_thing args parse failed");

    aclError ret = aclrtMakeThing(&thing, sizeHint, kind);
    return Py_BuildValue("ki", reinterpret_cast<uintptr_t>(thing), ret);
}

PyObject* WrapWaitAll(PyObject* /* self */, PyObject* /* args */)
{
    aclError ret = 0;
    {
        PyThreadState* state = PyEval_SaveThread();
        ret = aclrtWaitAll();
        PyEval_RestoreThread(state);
    }
    return Py_BuildValue("i", ret);
}

static PyObject* DescribeThing(const aclrtThing& thing)
{
    PyObject* pyDict = PyDict_New();
    CHECK_NULL(SetItemToDict(pyDict, "size", Py_BuildValue("k", thing.size)));
    return pyDict;
}

PyObject* WrapThingInfo(PyObject* /* self */, PyObject* args)
{
    void* thing = nullptr;
    aclrtThing info{};
    CHECK_NULL(PyArg_ParseTuple(args, "k", &thing), "acl.rt.thing_info args parse failed");
    aclError ret = aclrtThingInfo(thing, &info);
    PyObject* described = DescribeThing(info);
    PyObject* obj = Py_BuildValue("Oi", described, ret);
    Py_XDECREF(described);
    return obj;
}

PyObject* WrapThingSizes(PyObject* /* self */, PyObject* args)
{
    void* thing = nullptr;
    size_t count = 0;
    CHECK_NULL(PyArg_ParseTuple(args, "kk", &thing, &count), "acl.rt.thing_sizes args parse failed");
    if (count > 16) {
        return Py_BuildValue("Oi", Py_None, ACL_ERROR_INVALID_PARAM);
    }
    PyObject* sizes = PyList_New(count);
    aclError ret = aclrtThingSizes(thing, sizes, count);
    if (ret != 0) {
        return nullptr;
    }
    PyObject* obj = Py_BuildValue("Oi", sizes, ret);
    Py_XDECREF(sizes);
    return obj;
}

PyObject* WrapThingCount(PyObject* /* self */, PyObject* args)
{
    void* thing = nullptr;
    CHECK_NULL(PyArg_ParseTuple(args, "k", &thing), "acl.rt.thing_count args parse failed");
    size_t ret = aclrtThingCount(thing);
    return Py_BuildValue("k", ret);
}

PyObject* WrapDebugThing(PyObject* /* self */, PyObject* args)
{
    void* thing = nullptr;
    CHECK_NULL(PyArg_ParseTuple(args, "k", &thing), "acl.rt.debug_thing args parse failed");
    aclError ret = aclrtDebugThing(thing);
    return Py_BuildValue("i", ret);
}

namespace {
PyMethodDef g_fakeRt[] = {
    {"make_thing", WrapMakeThing, METH_VARARGS, "make a thing"},
    {"wait_all", WrapWaitAll, METH_VARARGS,
     "wait for everything"},
    {"thing_info", WrapThingInfo, METH_VARARGS, "describe a thing"},
    {"thing_sizes", WrapThingSizes, METH_VARARGS, "sizes"},
    {"thing_count", WrapThingCount, METH_VARARGS, "count"},
#ifdef WITH_DEBUG
    {"debug_thing", WrapDebugThing, METH_VARARGS, "debug"},
#endif // WITH_DEBUG
    {nullptr, nullptr, 0, nullptr}};
} // namespace

PyMethodDef* GetFakeRtMethods() { return g_fakeRt; }
