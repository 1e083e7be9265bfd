// An invented extension module in the style of pyACL's wrappers: a fixture for
// tools/pyacl_surface.py (tests/test_pyacl_surface.py). Nothing here is real pyACL.
#include <Python.h>
#include "rt/fake_rt.h"

namespace {
PyObject* WrapStart(PyObject* /* self */, PyObject* args)
{
    const char* config = nullptr;
    CHECK_NULL(PyArg_ParseTuple(args, "|s", &config), "acl.start args parse failed");
    aclError ret = aclStartEverything(config);
    return Py_BuildValue("i", ret);
}

PyObject* WrapLabel(PyObject* /* self */, PyObject* /* args */)
{
    const char* ret = aclFakeLabel();  // may be NULL: Python sees None
    return Py_BuildValue("s", ret);
}

PyObject* WrapShout(PyObject* /* self */, PyObject* args)
{
    char* text = nullptr;
    CHECK_NULL(PyArg_ParseTuple(args, "s", &text), "acl.shout args parse failed");
    Py_INCREF(Py_None);
    return Py_None;
}
} // namespace

static PyMethodDef g_topMethods[] = {
    {"start", WrapStart, METH_VARARGS, "start"},
    {"label", WrapLabel, METH_VARARGS, "label"},
    {"shout", WrapShout, METH_VARARGS, "shout"},
    {nullptr, nullptr, 0, nullptr}};

static struct PyModuleDef g_module = {PyModuleDef_HEAD_INIT, "acl", "", -1, g_topMethods, nullptr};

PyObject* PyInit_acl(void)
{
    PyObject* m = PyModule_Create(&g_module);
    AddSubModule(m, "rt", GetFakeRtMethods());
    AddSubModule(m, "extra", GetExtraMethods());
    AddSubModule(m, "mdl", GetFakeMdlMethods());
    AddSubModule(m, "util", GetFakeUtilMethods());
    return m;
}
