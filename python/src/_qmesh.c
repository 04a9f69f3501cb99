/* _qmesh.c — the C extension of the Python package qmesh (docs/python.md), over the public API
 * only: include/qmesh.h, include/qmesh_dlpack.h, Python.h and system headers.
 *
 * In: calls of python/qmesh/__init__.py (inputs already normalized there: a C-contiguous float32
 * or float64 buffer, a DLPack capsule, or a file path). Out: Scenario, State and Shard objects,
 * plan JSON text, and qmesh.Error / qmesh.RunError exceptions carrying the library's code and its
 * one-line message (qm_status_format).
 * Threads: the GIL is released around every library call that can take time (scenario load, plan,
 * open, encode, read, gather); signals (Ctrl-C) are checked between those phases and between
 * read-back chunks. The states made in one context (by one encode call, or by every call of one
 * shape through the context cache) share it, and the library lets one thread use a context at a
 * time: a mutex per context ("group", taken without the GIL) serializes their calls and the
 * encodes in it, DLPack deleters included (a consumer may run them in any thread).
 * Must not: call into Python while holding a group mutex; free a state a DLPack tensor still uses
 * (each tensor holds a library reference, qm_state_retain).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "qmesh.h"
#include "qmesh_dlpack.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static PyObject *g_error;        /* qmesh.Error(ValueError) */
static PyObject *g_run_error;    /* qmesh.RunError(Error, RuntimeError) */
static PyObject *g_plan_factory; /* qmesh.Plan.from_json, set by the Python layer (may be NULL) */

/* ---- errors ------------------------------------------------------------------------------------ */

/* Runtime failures (the machine, memory, files, numerics, interruption) are RunError; invalid
 * requests and inputs are Error. */
static int is_runtime_code(qm_code c)
{
    return c == QM_E_NOMEM || c == QM_E_BACKEND || c == QM_E_UNSUPPORTED || c == QM_E_IO ||
           c == QM_E_INTERNAL || c == QM_E_NUMERIC || c == QM_E_OUTPUT || c == QM_E_INTERRUPTED;
}

/* Raise the status as qmesh.Error/RunError with .code, .message and .plan (a Plan from plan_json,
 * or None). Returns NULL. */
static PyObject *raise_status(const qm_status *st, const char *plan_json)
{
    char line[QM_STATUS_MSG_BYTES + QM_STATUS_FILE_BYTES + 64];
    qm_status_format(st, line, sizeof line);
    PyObject *type = is_runtime_code(st->code) ? g_run_error : g_error;
    PyObject *exc = PyObject_CallFunction(type, "s", line);
    if (!exc)
        return NULL;
    PyObject *plan = Py_None;
    Py_INCREF(plan);
    if (plan_json && g_plan_factory) {
        Py_DECREF(plan);
        plan = PyObject_CallFunction(g_plan_factory, "s", plan_json);
        if (!plan) {
            Py_DECREF(exc);
            return NULL;
        }
    }
    if (PyObject_SetAttrString(exc, "code", PyUnicode_FromString(qm_code_name(st->code))) ||
        PyObject_SetAttrString(exc, "message", PyUnicode_FromString(line)) ||
        PyObject_SetAttrString(exc, "plan", plan)) {
        Py_DECREF(plan);
        Py_DECREF(exc);
        return NULL;
    }
    Py_DECREF(plan);
    PyErr_SetObject(type, exc);
    Py_DECREF(exc);
    return NULL;
}

static PyObject *raise_code(qm_code code, const char *msg)
{
    qm_status st;
    qm_status_clear(&st);
    st.code = code;
    snprintf(st.msg, sizeof st.msg, "%s", msg);
    return raise_status(&st, NULL);
}

/* ---- groups: one context and the states made in it ---------------------------------------------- */

typedef struct group {
    pthread_mutex_t mu;
    atomic_int refs;
} group;

static group *group_new(void)
{
    group *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    pthread_mutex_init(&g->mu, NULL);
    atomic_init(&g->refs, 1);
    return g;
}

static group *group_retain(group *g)
{
    atomic_fetch_add(&g->refs, 1);
    return g;
}

static void group_release(group *g)
{
    if (g && atomic_fetch_sub(&g->refs, 1) == 1) {
        pthread_mutex_destroy(&g->mu);
        free(g);
    }
}

/* ---- Scenario ------------------------------------------------------------------------------------ */

typedef struct {
    PyObject_HEAD
    qm_scenario *sc;
} ScenarioObject;

static PyTypeObject ScenarioType;

static void Scenario_dealloc(ScenarioObject *self)
{
    qm_scenario_destroy(self->sc);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *scenario_wrap(PyTypeObject *type, qm_scenario *sc)
{
    ScenarioObject *o = (ScenarioObject *)type->tp_alloc(type, 0);
    if (!o) {
        qm_scenario_destroy(sc);
        return NULL;
    }
    o->sc = sc;
    return (PyObject *)o;
}

/* Scenario(path=None): a scenario file, or the built-in simulated mesh. */
static PyObject *Scenario_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"path", NULL};
    PyObject *path = Py_None, *bytes = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:Scenario", kwlist, &path))
        return NULL;
    if (path != Py_None && !PyUnicode_FSConverter(path, &bytes))
        return NULL;
    const char *p = bytes ? PyBytes_AS_STRING(bytes) : NULL;
    qm_scenario *sc = NULL;
    qm_status st;
    qm_code rc;
    Py_BEGIN_ALLOW_THREADS
    rc = qm_scenario_open(p, &sc, &st);
    Py_END_ALLOW_THREADS
    Py_XDECREF(bytes);
    if (rc != QM_OK)
        return raise_status(&st, NULL);
    return scenario_wrap(type, sc);
}

PyDoc_STRVAR(Scenario_load_doc,
"load(path) -> Scenario\n\n"
"Load and validate a qmesh/1 YAML scenario file. Raises qmesh.Error with the loader's code\n"
"(E-YAML-SYNTAX, E-UNKNOWN-KEY, ...) and file:line:col, or qmesh.RunError E-IO.");

static PyObject *Scenario_load(PyObject *cls, PyObject *path)
{
    PyObject *args = PyTuple_Pack(1, path);
    if (!args)
        return NULL;
    PyObject *o = Scenario_new((PyTypeObject *)cls, args, NULL);
    Py_DECREF(args);
    return o;
}

PyDoc_STRVAR(Scenario_from_yaml_doc,
"from_yaml(text, name=None) -> Scenario\n\n"
"Parse and validate qmesh/1 YAML text; name (default '<text>') is used in error messages.");

static PyObject *Scenario_from_yaml(PyObject *cls, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"text", "name", NULL};
    const char *text = NULL, *name = NULL;
    Py_ssize_t len = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "s#|z:from_yaml", kwlist, &text, &len, &name))
        return NULL;
    qm_scenario *sc = NULL;
    qm_status st;
    qm_code rc;
    Py_BEGIN_ALLOW_THREADS
    rc = qm_scenario_parse(text, (size_t)len, name, &sc, &st);
    Py_END_ALLOW_THREADS
    if (rc != QM_OK)
        return raise_status(&st, NULL);
    return scenario_wrap((PyTypeObject *)cls, sc);
}

PyDoc_STRVAR(Scenario_builtin_doc, "builtin() -> Scenario\n\nThe built-in simulated mesh.");

static PyObject *Scenario_builtin(PyObject *cls, PyObject *unused)
{
    (void)unused;
    PyObject *none = PyTuple_New(0);
    PyObject *o = none ? Scenario_new((PyTypeObject *)cls, none, NULL) : NULL;
    Py_XDECREF(none);
    return o;
}

PyDoc_STRVAR(Scenario_validate_doc,
"validate() -> Scenario\n\n"
"A Scenario is validated when it is loaded (load, from_yaml and the constructor raise on the\n"
"first problem), so this returns self; kept for symmetry with `qmesh scenario check`.");

static PyObject *Scenario_validate(PyObject *self, PyObject *unused)
{
    (void)unused;
    Py_INCREF(self);
    return self;
}

static PyObject *Scenario_get_name(ScenarioObject *self, void *unused)
{
    (void)unused;
    return PyUnicode_FromString(qm_scenario_name(self->sc));
}

static PyObject *Scenario_repr(ScenarioObject *self)
{
    return PyUnicode_FromFormat("qmesh.Scenario('%s')", qm_scenario_name(self->sc));
}

static PyMethodDef Scenario_methods[] = {
    {"load", (PyCFunction)Scenario_load, METH_O | METH_CLASS, Scenario_load_doc},
    {"from_yaml", (PyCFunction)(void (*)(void))Scenario_from_yaml,
     METH_VARARGS | METH_KEYWORDS | METH_CLASS, Scenario_from_yaml_doc},
    {"builtin", (PyCFunction)Scenario_builtin, METH_NOARGS | METH_CLASS, Scenario_builtin_doc},
    {"validate", (PyCFunction)Scenario_validate, METH_NOARGS, Scenario_validate_doc},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef Scenario_getset[] = {
    {"name", (getter)Scenario_get_name, NULL, "The file it came from, else its name.", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

PyDoc_STRVAR(Scenario_doc,
"Scenario(path=None)\n\n"
"A machine description: hosts, devices, links, ranks (the qmesh/1 YAML format). path None is\n"
"the built-in simulated mesh (4 H100-class devices on an NVSwitch). Loading validates it.\n"
"See also Scenario.load(path) and Scenario.from_yaml(text).");

static PyTypeObject ScenarioType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "qmesh.Scenario",
    .tp_basicsize = sizeof(ScenarioObject),
    .tp_dealloc = (destructor)Scenario_dealloc,
    .tp_repr = (reprfunc)Scenario_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = Scenario_doc,
    .tp_methods = Scenario_methods,
    .tp_getset = Scenario_getset,
    .tp_new = Scenario_new,
};

/* ---- requests --------------------------------------------------------------------------------- */

typedef struct req_args {
    PyObject *scenario;
    qm_request r;
} req_args;

static int parse_name(const char *what, const char *text, const char *(*name)(int), int count,
                      int *out, qm_code code)
{
    char list[256] = "";
    for (int i = 0; i < count; ++i) {
        if (name(i) && strcmp(name(i), text) == 0) {
            *out = i;
            return 0;
        }
        strncat(list, name(i), sizeof list - strlen(list) - 1);
        if (i + 1 < count)
            strncat(list, ", ", sizeof list - strlen(list) - 1);
    }
    char msg[512];
    snprintf(msg, sizeof msg, "plan: unknown %s '%.64s'; use one of %s", what, text, list);
    raise_code(code, msg);
    return -1;
}

static const char *policy_name_i(int i) { return qm_policy_name((qm_policy)i); }
static const char *encoding_name_i(int i) { return qm_encoding_name((qm_encoding)i); }

/* (scenario, qubits, dtype, policy, batch, features, ranks, encoding, gather) from the Python
 * layer, which has applied the defaults. */
static int parse_request(PyObject *args, req_args *a)
{
    if (!PyTuple_Check(args)) {
        PyErr_SetString(PyExc_TypeError, "the request must be a tuple");
        return -1;
    }
    unsigned long long qubits, batch, features;
    int ranks, e = 0;
    const char *dtype, *policy, *encoding, *gather;
    if (!PyArg_ParseTuple(args, "OKssKKiss", &a->scenario, &qubits, &dtype, &policy, &batch,
                          &features, &ranks, &encoding, &gather))
        return -1;
    if (!PyObject_TypeCheck(a->scenario, &ScenarioType)) {
        PyErr_SetString(PyExc_TypeError, "scenario must be a qmesh.Scenario");
        return -1;
    }
    qm_request_init(&a->r);
    a->r.qubits = qubits > 0xFFFFFFFFull ? 0xFFFFFFFFu : (unsigned)qubits;
    if (strcmp(dtype, "complex64") == 0)
        a->r.dtype = QM_DTYPE_COMPLEX64;
    else if (strcmp(dtype, "complex128") == 0)
        a->r.dtype = QM_DTYPE_COMPLEX128;
    else {
        char msg[160];
        snprintf(msg, sizeof msg, "plan: dtype must be complex64 or complex128 (got '%.64s')",
                 dtype);
        raise_code(QM_E_DTYPE, msg);
        return -1;
    }
    if (parse_name("policy", policy, policy_name_i, QM_POLICY_COUNT_, &e, QM_E_POLICY))
        return -1;
    a->r.policy = (qm_policy)e;
    if (parse_name("encoding", encoding, encoding_name_i, QM_ENCODING_COUNT_, &e, QM_E_ARG))
        return -1;
    a->r.encoding = (qm_encoding)e;
    a->r.batch = batch;
    a->r.features = features;
    a->r.ranks = ranks;
    snprintf(a->r.gather, sizeof a->r.gather, "%s", gather);
    return 0;
}

/* Plan the request: a context (feasible or not) or NULL with the error raised. */
static qm_context *make_context(const req_args *a)
{
    qm_context *ctx = NULL;
    qm_status st;
    qm_code rc;
    const qm_scenario *sc = ((ScenarioObject *)a->scenario)->sc;
    Py_BEGIN_ALLOW_THREADS
    rc = qm_context_create(sc, &a->r, &ctx, &st);
    Py_END_ALLOW_THREADS
    if (rc != QM_OK) {
        raise_status(&st, NULL);
        return NULL;
    }
    return ctx;
}

static PyObject *plan_json_of(const qm_context *ctx)
{
    char *json = NULL;
    qm_status st;
    if (qm_context_plan_json(ctx, &json, &st) != QM_OK)
        return raise_status(&st, NULL);
    PyObject *s = PyUnicode_FromString(json);
    qm_free(json);
    return s;
}

PyDoc_STRVAR(plan_json_doc,
"plan_json(request, input=None, output=None, out_dir=False, cuda=True) -> str\n\n"
"The plan as `qmesh plan --json` prints it (use qmesh.plan()); with an input file or an output,\n"
"the data path's estimates too (qm_context_plan_data_path; staging on devices when cuda).");

static PyObject *py_plan_json(PyObject *m, PyObject *args)
{
    (void)m;
    req_args a;
    PyObject *req;
    const char *input = NULL, *output = NULL;
    int out_dir = 0, cuda = 1;
    if (!PyArg_ParseTuple(args, "O!|zzpp:plan_json", &PyTuple_Type, &req, &input, &output,
                          &out_dir, &cuda) ||
        parse_request(req, &a))
        return NULL;
    qm_context *ctx = make_context(&a);
    if (!ctx)
        return NULL;
    if (input || output) {
        qm_status st;
        qm_code rc;
        Py_BEGIN_ALLOW_THREADS
        rc = qm_context_plan_data_path(ctx, input, output, out_dir,
                                       cuda ? QM_BACKEND_CUDA : QM_BACKEND_SIM, &st);
        Py_END_ALLOW_THREADS
        if (rc != QM_OK) {
            qm_context_destroy(ctx);
            return raise_status(&st, NULL);
        }
    }
    PyObject *s = plan_json_of(ctx);
    qm_context_destroy(ctx);
    return s;
}

/* ---- State and Shard -------------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    qm_state *s;
    group *g;
    int ndim;          /* 1: shape (2^n,); 2: (batch, 2^n) */
    uint64_t batch;
    PyObject *shards;  /* tuple, made on first use */
} StateObject;

typedef struct {
    PyObject_HEAD
    qm_state *s;        /* a library reference (qm_state_retain): no cycle with the State */
    group *g;           /* a reference */
    qm_shard_view v;
} ShardObject;

static PyTypeObject StateType, ShardType;

/* Drop one library reference to a state (under its group's mutex, without the GIL) and one
 * reference to the group. Either may be NULL. */
static void drop_state(qm_state *s, group *g)
{
    if (s) {
        Py_BEGIN_ALLOW_THREADS
        pthread_mutex_lock(&g->mu);
        qm_state_destroy(s);
        pthread_mutex_unlock(&g->mu);
        Py_END_ALLOW_THREADS
    }
    group_release(g);
}

static void State_dealloc(StateObject *self)
{
    Py_CLEAR(self->shards);
    drop_state(self->s, self->g);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *state_wrap(qm_state *s, group *g, int ndim, uint64_t batch)
{
    StateObject *o = PyObject_New(StateObject, &StateType);
    if (!o) {
        qm_state_destroy(s);
        group_release(g);
        return NULL;
    }
    o->s = s;
    o->g = g;
    o->ndim = ndim;
    o->batch = batch;
    o->shards = NULL;
    return (PyObject *)o;
}

static uint64_t state_amps(const StateObject *self)
{
    return ((uint64_t)1 << qm_state_qubits(self->s)) * self->batch;
}

static PyObject *State_get_qubits(StateObject *self, void *u)
{
    (void)u;
    return PyLong_FromUnsignedLong(qm_state_qubits(self->s));
}

static PyObject *State_get_dtype(StateObject *self, void *u)
{
    (void)u;
    return PyUnicode_FromString(qm_dtype_name(qm_state_dtype(self->s)));
}

static PyObject *State_get_batch(StateObject *self, void *u)
{
    (void)u;
    return PyLong_FromUnsignedLongLong(self->batch);
}

static PyObject *State_get_shape(StateObject *self, void *u)
{
    (void)u;
    const unsigned long long n = 1ull << qm_state_qubits(self->s);
    if (self->ndim == 1)
        return Py_BuildValue("(K)", n);
    return Py_BuildValue("(KK)", (unsigned long long)self->batch, n);
}

static PyObject *State_get_shards(StateObject *self, void *u)
{
    (void)u;
    if (self->shards) {
        Py_INCREF(self->shards);
        return self->shards;
    }
    const int n = qm_state_shard_count(self->s);
    PyObject *t = PyTuple_New(n);
    if (!t)
        return NULL;
    for (int i = 0; i < n; ++i) {
        ShardObject *sh = PyObject_New(ShardObject, &ShardType);
        if (!sh) {
            Py_DECREF(t);
            return NULL;
        }
        sh->s = NULL;
        sh->g = group_retain(self->g);
        qm_status st;
        qm_code rc;
        Py_BEGIN_ALLOW_THREADS
        pthread_mutex_lock(&self->g->mu);
        rc = qm_state_shard_view(self->s, i, &sh->v, &st);
        if (rc == QM_OK)
            sh->s = qm_state_retain(self->s);
        pthread_mutex_unlock(&self->g->mu);
        Py_END_ALLOW_THREADS
        PyTuple_SET_ITEM(t, i, (PyObject *)sh);
        if (rc != QM_OK) {
            Py_DECREF(t);
            return raise_status(&st, NULL);
        }
    }
    self->shards = t;
    Py_INCREF(t);
    return t;
}

/* Copy every amplitude into a writable C-contiguous buffer of the right size (the Python layer
 * makes the NumPy array), in chunks of 64 MiB, the GIL released, signals checked between chunks. */
PyDoc_STRVAR(State_read_into_doc,
"_read_into(buffer)\n\nCopy every amplitude into a writable contiguous buffer (State.to_numpy).");

static PyObject *State_read_into(StateObject *self, PyObject *dst)
{
    Py_buffer b;
    if (PyObject_GetBuffer(dst, &b, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    const qm_dtype dt = qm_state_dtype(self->s);
    const uint64_t es = qm_dtype_size(dt), total = state_amps(self);
    if ((uint64_t)b.len != total * es) {
        PyBuffer_Release(&b);
        PyErr_Format(PyExc_ValueError, "the buffer has %zd bytes but the state has %llu", b.len,
                     (unsigned long long)(total * es));
        return NULL;
    }
    const uint64_t chunk = ((uint64_t)64 << 20) / es;
    for (uint64_t pos = 0; pos < total;) {
        const uint64_t n = total - pos < chunk ? total - pos : chunk;
        qm_status st;
        qm_code rc;
        Py_BEGIN_ALLOW_THREADS
        pthread_mutex_lock(&self->g->mu);
        rc = qm_state_read(self->s, pos, n, dt, (char *)b.buf + pos * es, &st);
        pthread_mutex_unlock(&self->g->mu);
        Py_END_ALLOW_THREADS
        if (rc != QM_OK) {
            PyBuffer_Release(&b);
            return raise_status(&st, NULL);
        }
        pos += n;
        if (pos < total && PyErr_CheckSignals() < 0) {
            PyBuffer_Release(&b);
            return NULL;
        }
    }
    PyBuffer_Release(&b);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(State_to_numpy_doc,
"to_numpy() -> numpy.ndarray\n\n"
"Every amplitude assembled on the host (qm_state_read, the GIL released, in 64 MiB chunks with\n"
"Ctrl-C checked between them): complex64 or complex128 of shape state.shape, (2**qubits,) for\n"
"1-D input, (batch, 2**qubits) for a batch. A copy: later changes to the state do not show.");

static PyObject *State_to_numpy(StateObject *self, PyObject *u)
{
    (void)u;
    PyObject *np = PyImport_ImportModule("numpy");
    if (!np)
        return NULL;
    PyObject *shape = State_get_shape(self, NULL);
    PyObject *arr = shape ? PyObject_CallMethod(np, "empty", "Os", shape,
                                                qm_dtype_name(qm_state_dtype(self->s)))
                          : NULL;
    Py_XDECREF(shape);
    Py_DECREF(np);
    if (!arr)
        return NULL;
    PyObject *r = State_read_into(self, arr);
    if (!r) {
        Py_DECREF(arr);
        return NULL;
    }
    Py_DECREF(r);
    return arr;
}

static PyObject *State_repr(StateObject *self)
{
    const int n = qm_state_shard_count(self->s);
    char shape[64];
    if (self->ndim == 1)
        snprintf(shape, sizeof shape, "(%llu,)", 1ull << qm_state_qubits(self->s));
    else
        snprintf(shape, sizeof shape, "(%llu, %llu)", (unsigned long long)self->batch,
                 1ull << qm_state_qubits(self->s));
    return PyUnicode_FromFormat("qmesh.State(qubits=%u, dtype='%s', shape=%s, %d shard%s)",
                                qm_state_qubits(self->s), qm_dtype_name(qm_state_dtype(self->s)),
                                shape, n, n == 1 ? "" : "s");
}

static PyObject *State_len(StateObject *self, PyObject *u)
{
    (void)u;
    return PyLong_FromUnsignedLongLong(state_amps(self));
}

PyDoc_STRVAR(State_gather_doc,
"gather(device=0) -> State\n\n"
"A new one-shard state with every amplitude on mesh device `device` (copied shard by shard,\n"
"peer copies where the devices have a path). Raises qmesh.Error E-CAPACITY when it does not fit,\n"
"E-ARG for a device out of range.");

static PyObject *State_gather(StateObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"device", NULL};
    int device = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|i:gather", kwlist, &device))
        return NULL;
    qm_state *g = NULL;
    qm_status st;
    qm_code rc;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&self->g->mu);
    rc = qm_state_gather(self->s, device, &g, &st);
    pthread_mutex_unlock(&self->g->mu);
    Py_END_ALLOW_THREADS
    if (rc != QM_OK)
        return raise_status(&st, NULL);
    return state_wrap(g, group_retain(self->g), self->ndim, self->batch);
}

/* ---- DLPack ------------------------------------------------------------------------------------ */

/* The exported tensor: the library's tensor (which holds a state reference) wrapped so that its
 * deleter takes the group's mutex (the consumer may call it from any thread, with or without the
 * GIL). */
typedef struct dl_wrap {
    DLManagedTensor outer;
    DLManagedTensor *inner;
    group *g;
} dl_wrap;

static void dl_wrap_delete(DLManagedTensor *self)
{
    dl_wrap *w = self->manager_ctx;
    pthread_mutex_lock(&w->g->mu);
    w->inner->deleter(w->inner);
    pthread_mutex_unlock(&w->g->mu);
    group_release(w->g);
    free(w);
}

static void capsule_destructor(PyObject *cap)
{
    /* renamed "used_dltensor" by a consumer that took ownership: then it is not ours to delete */
    if (!PyCapsule_IsValid(cap, "dltensor"))
        return;
    DLManagedTensor *t = PyCapsule_GetPointer(cap, "dltensor");
    if (t && t->deleter)
        t->deleter(t);
}

/* A "dltensor" capsule of shard i. stream and max_version are accepted as the DLPack protocol
 * passes them: encodes complete before they return, so no stream needs to wait; this producer
 * speaks the legacy (unversioned) DLManagedTensor, which consumers accept for any max_version. */
static PyObject *dlpack_capsule(qm_state *state, group *g, int shard, PyObject *args,
                                PyObject *kw)
{
    static char *kwlist[] = {"stream", "max_version", "dl_device", "copy", NULL};
    PyObject *stream = Py_None, *maxv = Py_None, *dl_device = Py_None, *copy = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|$OOOO:__dlpack__", kwlist, &stream, &maxv,
                                     &dl_device, &copy))
        return NULL;
    if (copy != Py_None && PyObject_IsTrue(copy) == 1) {
        PyErr_SetString(PyExc_BufferError, "qmesh exports shards zero-copy only (copy=True)");
        return NULL;
    }
    dl_wrap *w = calloc(1, sizeof *w);
    if (!w)
        return PyErr_NoMemory();
    qm_status st;
    qm_code rc;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&g->mu);
    rc = qm_state_shard_to_dlpack(state, shard, &w->inner, &st);
    pthread_mutex_unlock(&g->mu);
    Py_END_ALLOW_THREADS
    if (rc != QM_OK) {
        free(w);
        return raise_status(&st, NULL);
    }
    w->outer.dl_tensor = w->inner->dl_tensor;
    w->outer.manager_ctx = w;
    w->outer.deleter = dl_wrap_delete;
    w->g = group_retain(g);
    if (dl_device != Py_None) {
        int type = -1, id = -1;
        if (!PyArg_ParseTuple(dl_device, "ii", &type, &id) ||
            type != (int)w->outer.dl_tensor.device.device_type ||
            id != w->outer.dl_tensor.device.device_id) {
            dl_wrap_delete(&w->outer);
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_BufferError, "qmesh exports a shard on its own device only "
                                "(dl_device differs; copy it with the consumer)");
            return NULL;
        }
    }
    PyObject *cap = PyCapsule_New(&w->outer, "dltensor", capsule_destructor);
    if (!cap)
        dl_wrap_delete(&w->outer);
    return cap;
}

static PyObject *dlpack_device(const qm_shard_view *v)
{
    return v->device_kind == 2 ? Py_BuildValue("(ii)", (int)kDLCUDA, v->cuda_device)
                               : Py_BuildValue("(ii)", (int)kDLCPU, 0);
}

static int state_single_shard(StateObject *self)
{
    const int n = qm_state_shard_count(self->s);
    if (n == 1)
        return 0;
    char msg[256];
    snprintf(msg, sizeof msg, "dlpack: the state has %d shards; export state.shards[i], or "
             "state.gather() first", n);
    raise_code(QM_E_ARG, msg);
    return -1;
}

PyDoc_STRVAR(dlpack_doc,
"__dlpack__(*, stream=None, max_version=None, dl_device=None, copy=None) -> capsule\n\n"
"Zero-copy DLPack export (a legacy 'dltensor' capsule of a 1-D complex tensor; kDLCPU on the\n"
"simulator, kDLCUDA on GPUs). The capsule holds a reference to the state: the memory stays\n"
"valid while any consumer holds the tensor, even after this object is gone. On a State only\n"
"when it has one shard.");

static PyObject *State_dlpack(StateObject *self, PyObject *args, PyObject *kw)
{
    if (state_single_shard(self))
        return NULL;
    return dlpack_capsule(self->s, self->g, 0, args, kw);
}

static PyObject *State_dlpack_device(StateObject *self, PyObject *u)
{
    (void)u;
    if (state_single_shard(self))
        return NULL;
    PyObject *t = State_get_shards(self, NULL);
    if (!t)
        return NULL;
    PyObject *d = dlpack_device(&((ShardObject *)PyTuple_GET_ITEM(t, 0))->v);
    Py_DECREF(t);
    return d;
}

static PyObject *State_traffic(StateObject *self, PyObject *u)
{
    (void)u;
    qm_traffic t;
    qm_status st;
    if (qm_state_traffic(self->s, &t, &st) != QM_OK)
        return raise_status(&st, NULL);
    return Py_BuildValue("{sKsKsKsK}", "h2d_bytes", (unsigned long long)t.h2d_bytes, "d2h_bytes",
                         (unsigned long long)t.d2h_bytes, "d2d_bytes",
                         (unsigned long long)t.d2d_bytes, "peer_bytes",
                         (unsigned long long)t.peer_bytes);
}

static PyMethodDef State_methods[] = {
    {"traffic", (PyCFunction)State_traffic, METH_NOARGS,
     "traffic() -> dict: bytes the backend holding this state has moved since it was opened\n"
     "(h2d_bytes, d2h_bytes, d2d_bytes, peer_bytes), summed over its devices. States made in\n"
     "one context (one encode() call, or every call of one shape through the context cache)\n"
     "share their backend; to_numpy() adds d2h bytes. A CUDA tensor encoded on\n"
     "the GPU it lives on shows h2d_bytes == 0: it never crossed the host link (d2h_bytes: the\n"
     "norms' block sums only, 8 bytes per block)."},
    {"_read_into", (PyCFunction)State_read_into, METH_O, State_read_into_doc},
    {"to_numpy", (PyCFunction)State_to_numpy, METH_NOARGS, State_to_numpy_doc},
    {"amplitudes", (PyCFunction)State_len, METH_NOARGS,
     "amplitudes() -> int: batch x 2**qubits, every amplitude of every state."},
    {"gather", (PyCFunction)(void (*)(void))State_gather, METH_VARARGS | METH_KEYWORDS,
     State_gather_doc},
    {"__dlpack__", (PyCFunction)(void (*)(void))State_dlpack, METH_VARARGS | METH_KEYWORDS,
     dlpack_doc},
    {"__dlpack_device__", (PyCFunction)State_dlpack_device, METH_NOARGS,
     "__dlpack_device__() -> (device_type, device_id): (1, 0) kDLCPU or (2, GPU) kDLCUDA."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef State_getset[] = {
    {"qubits", (getter)State_get_qubits, NULL, "Qubits per state (2^qubits amplitudes).", NULL},
    {"dtype", (getter)State_get_dtype, NULL, "'complex64' or 'complex128'.", NULL},
    {"batch", (getter)State_get_batch, NULL, "States (input rows); 1 for 1-D input.", NULL},
    {"shape", (getter)State_get_shape, NULL,
     "(2**qubits,) for 1-D input, (batch, 2**qubits) for a batch.", NULL},
    {"shards", (getter)State_get_shards, NULL,
     "Tuple of Shard: contiguous global amplitude ranges, each on one device.", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

PyDoc_STRVAR(State_doc,
"An encoded state (or batch of states) sharded across the mesh's devices; made by\n"
"qmesh.encode(). to_numpy() assembles it on the host; shards[i] export zero-copy via DLPack.");

static PyTypeObject StateType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "qmesh.State",
    .tp_basicsize = sizeof(StateObject),
    .tp_dealloc = (destructor)State_dealloc,
    .tp_repr = (reprfunc)State_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = State_doc,
    .tp_methods = State_methods,
    .tp_getset = State_getset,
};

static void Shard_dealloc(ShardObject *self)
{
    drop_state(self->s, self->g);
    PyObject_Free(self);
}

static PyObject *Shard_dlpack(ShardObject *self, PyObject *args, PyObject *kw)
{
    return dlpack_capsule(self->s, self->g, self->v.shard, args, kw);
}

static PyObject *Shard_dlpack_device(ShardObject *self, PyObject *u)
{
    (void)u;
    return dlpack_device(&self->v);
}

static PyObject *Shard_repr(ShardObject *self)
{
    return PyUnicode_FromFormat("qmesh.Shard(%d, device=%d, device_id='%s', start=%llu, end=%llu, "
                                "%s)", self->v.shard, self->v.device, self->v.device_id,
                                (unsigned long long)self->v.start,
                                (unsigned long long)self->v.end,
                                self->v.device_kind == 2 ? "cuda" : "host");
}

static PyObject *Shard_get(ShardObject *self, void *which)
{
    const qm_shard_view *v = &self->v;
    switch ((int)(intptr_t)which) {
    case 0: return PyLong_FromLong(v->shard);
    case 1: return PyLong_FromLong(v->device);
    case 2: return PyUnicode_FromString(v->device_id);
    case 3: return PyLong_FromUnsignedLongLong(v->start);
    case 4: return PyLong_FromUnsignedLongLong(v->end);
    case 5: return PyLong_FromLong(v->rank);
    case 6: return PyLong_FromVoidPtr(v->data);
    case 7: return PyLong_FromLong(v->device_kind == 2 ? v->cuda_device : -1);
    default: return PyUnicode_FromString(qm_dtype_name(v->dtype));
    }
}

static PyMethodDef Shard_methods[] = {
    {"__dlpack__", (PyCFunction)(void (*)(void))Shard_dlpack, METH_VARARGS | METH_KEYWORDS,
     dlpack_doc},
    {"__dlpack_device__", (PyCFunction)Shard_dlpack_device, METH_NOARGS,
     "__dlpack_device__() -> (device_type, device_id): (1, 0) kDLCPU or (2, GPU) kDLCUDA."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef Shard_getset[] = {
    {"index", (getter)Shard_get, NULL, "Shard id: position in global index order.", (void *)0},
    {"device", (getter)Shard_get, NULL, "Mesh device index holding it.", (void *)1},
    {"device_id", (getter)Shard_get, NULL, "Mesh device id ('n0.g3').", (void *)2},
    {"start", (getter)Shard_get, NULL, "First global amplitude index.", (void *)3},
    {"end", (getter)Shard_get, NULL, "One past the last global amplitude index.", (void *)4},
    {"rank", (getter)Shard_get, NULL, "The rank holding it.", (void *)5},
    {"data_ptr", (getter)Shard_get, NULL,
     "Address of its memory (host on the simulator, device on CUDA).", (void *)6},
    {"cuda_device", (getter)Shard_get, NULL, "The CUDA ordinal of its GPU; -1 on the simulator.",
     (void *)7},
    {"dtype", (getter)Shard_get, NULL, "'complex64' or 'complex128'.", (void *)8},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject ShardType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "qmesh.Shard",
    .tp_basicsize = sizeof(ShardObject),
    .tp_dealloc = (destructor)Shard_dealloc,
    .tp_repr = (reprfunc)Shard_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One shard of a State: amplitudes [start, end) on one device. torch.from_dlpack(shard)"
              " is zero-copy and keeps the memory alive.",
    .tp_methods = Shard_methods,
    .tp_getset = Shard_getset,
};

/* ---- encode ------------------------------------------------------------------------------------- */

static qm_backend_kind backend_of(const char *b, int *bad)
{
    *bad = 0;
    if (strcmp(b, "sim") == 0)
        return QM_BACKEND_SIM;
    if (strcmp(b, "cuda") == 0)
        return QM_BACKEND_CUDA;
    if (strcmp(b, "auto") != 0)
        *bad = 1;
    return QM_BACKEND_AUTO;
}

static PyObject *bad_backend(const char *b)
{
    char msg[160];
    snprintf(msg, sizeof msg, "backend: unknown backend '%.64s'; use auto, sim or cuda", b);
    return raise_code(QM_E_ARG, msg);
}

/* The source of one encode: host rows (a buffer), device rows (a DLPack capsule of kDLCUDA
 * memory; kDLCPU capsules are host rows), or a file. */
typedef struct source {
    int kind;           /* 0 host, 1 device, 2 file */
    qm_host_data data;  /* kinds 0 and 1 */
    const char *path;   /* kind 2 */
} source;

/* Between phases: destroy what was made and raise KeyboardInterrupt (or whatever a Python signal
 * handler raised) when a signal arrived. */
static int interrupted(void) { return PyErr_CheckSignals() < 0; }

/* ---- the context cache ---------------------------------------------------------------------
 * A training loop encodes batches of one shape again and again. Planning and opening a backend
 * (CUDA: streams, page-locked staging) cost far more than encoding a small batch, so a context is
 * kept after its encode, keyed by (scenario, request, backend), with its group (the mutex of the
 * states made in it), and taken again by the next encode of the same key: CTX_CACHE_SLOTS
 * entries, the least recently used evicted. The GIL guards the table; an entry is taken out while
 * its encode runs, so two encodes never share a context (a second thread with the same key plans
 * its own, and both are kept). The encode holds the group's mutex, as every call on a state of
 * that context does. States keep their context and group alive, so clearing or evicting never
 * invalidates a state. QMESH_CONTEXT_CACHE=0 in the environment (read at import) turns it off;
 * qmesh.clear_cache() empties it (releasing the backends' memory once no state needs them). */
#define CTX_CACHE_SLOTS 4

typedef struct cache_entry {
    qm_context *ctx;             /* NULL: a free slot */
    group *g;                    /* the entry's reference */
    const qm_scenario *sc;       /* kept alive by ctx */
    qm_request r;
    qm_backend_kind backend;
    uint64_t used;               /* clock of the last put */
} cache_entry;

static cache_entry g_cache[CTX_CACHE_SLOTS];
static uint64_t g_cache_clock, g_cache_hits, g_cache_misses;
static int g_cache_on = 1;

static int same_request(const qm_request *a, const qm_request *b)
{
    return a->qubits == b->qubits && a->dtype == b->dtype && a->policy == b->policy &&
           a->batch == b->batch && a->features == b->features && a->encoding == b->encoding &&
           a->ranks == b->ranks && strcmp(a->gather, b->gather) == 0;
}

/* Drop a context and a group reference: under the group's mutex (a state of the context may be
 * in use in another thread), without the GIL. */
static void context_drop(qm_context *ctx, group *g)
{
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&g->mu);
    qm_context_destroy(ctx);
    pthread_mutex_unlock(&g->mu);
    Py_END_ALLOW_THREADS
    group_release(g);
}

/* The cached context for the key and its group (the entry's reference), taken out of the table;
 * NULL on a miss. */
static qm_context *cache_take(const qm_scenario *sc, const qm_request *r, qm_backend_kind backend,
                              group **g)
{
    for (int i = 0; g_cache_on && i < CTX_CACHE_SLOTS; ++i) {
        cache_entry *e = &g_cache[i];
        if (e->ctx && e->sc == sc && e->backend == backend && same_request(&e->r, r)) {
            qm_context *ctx = e->ctx;
            *g = e->g;
            *e = (cache_entry){0};
            g_cache_hits++;
            return ctx;
        }
    }
    g_cache_misses++;
    return NULL;
}

/* Keep an open context and a reference to its group under the key (or drop both when the cache
 * is off); evicts the least recently used entry when the table is full. */
static void cache_put(const qm_scenario *sc, const qm_request *r, qm_backend_kind backend,
                      qm_context *ctx, group *g)
{
    if (!g_cache_on) {
        context_drop(ctx, g);
        return;
    }
    int slot = 0;
    for (int i = 0; i < CTX_CACHE_SLOTS; ++i) {
        if (!g_cache[i].ctx) {
            slot = i;
            break;
        }
        if (g_cache[i].used < g_cache[slot].used)
            slot = i;
    }
    const cache_entry old = g_cache[slot];
    g_cache[slot] = (cache_entry){ctx, g, sc, *r, backend, ++g_cache_clock};
    if (old.ctx)
        context_drop(old.ctx, old.g);
}

PyDoc_STRVAR(clear_cache_doc,
"clear_cache() -> None\n\n"
"Drop the kept contexts (planned requests with an open backend) so that their backend memory\n"
"is released. States already made stay valid.");

static PyObject *py_clear_cache(PyObject *m, PyObject *u)
{
    (void)m, (void)u;
    for (int i = 0; i < CTX_CACHE_SLOTS; ++i) {
        const cache_entry e = g_cache[i];
        g_cache[i] = (cache_entry){0};
        if (e.ctx)
            context_drop(e.ctx, e.g);
    }
    Py_RETURN_NONE;
}

PyDoc_STRVAR(cache_info_doc,
"cache_info() -> dict\n\n"
"The context cache: {'enabled', 'entries', 'slots', 'hits', 'misses'}.");

static PyObject *py_cache_info(PyObject *m, PyObject *u)
{
    (void)m, (void)u;
    int n = 0;
    for (int i = 0; i < CTX_CACHE_SLOTS; ++i)
        n += g_cache[i].ctx != NULL;
    return Py_BuildValue("{s:O, s:i, s:i, s:K, s:K}", "enabled", g_cache_on ? Py_True : Py_False,
                         "entries", n, "slots", CTX_CACHE_SLOTS, "hits",
                         (unsigned long long)g_cache_hits, "misses",
                         (unsigned long long)g_cache_misses);
}

/* A planned, feasible context with its backend open, and its group (a reference): from the
 * cache, else made here. NULL with the error raised (an infeasible plan raises with its .plan). */
static qm_context *context_for(const req_args *a, qm_backend_kind backend, group **g)
{
    const qm_scenario *sc = ((ScenarioObject *)a->scenario)->sc;
    qm_context *ctx = cache_take(sc, &a->r, backend, g);
    if (ctx)
        return ctx;
    if (!(ctx = make_context(a)))
        return NULL;
    qm_plan_info info;
    qm_status st;
    qm_code rc = QM_OK;
    qm_context_plan_info(ctx, &info, NULL);
    if (!info.feasible) {
        PyObject *json = plan_json_of(ctx);
        if (json) {
            raise_status(&info.error, PyUnicode_AsUTF8(json));
            Py_DECREF(json);
        }
        qm_context_destroy(ctx);
        return NULL;
    }
    if (interrupted()) {
        qm_context_destroy(ctx);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    rc = qm_context_open(ctx, backend, &st);
    Py_END_ALLOW_THREADS
    if (rc != QM_OK) {
        qm_context_destroy(ctx);
        raise_status(&st, NULL);
        return NULL;
    }
    if (!(*g = group_new())) {
        qm_context_destroy(ctx);
        PyErr_NoMemory();
        return NULL;
    }
    return ctx;
}

static PyObject *encode_run(const req_args *a, qm_backend_kind backend, const source *src,
                            int ndim)
{
    const qm_scenario *sc = ((ScenarioObject *)a->scenario)->sc;
    group *g = NULL;
    qm_context *ctx = context_for(a, backend, &g);
    if (!ctx)
        return NULL;
    if (interrupted()) {
        cache_put(sc, &a->r, backend, ctx, g);
        return NULL;
    }
    qm_status st;
    qm_code rc;
    qm_state *s = NULL;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&g->mu);
    if (src->kind == 0)
        rc = qm_context_encode(ctx, &src->data, &s, &st);
    else if (src->kind == 1)
        rc = qm_context_encode_device(ctx, &src->data, &s, &st);
    else
        rc = qm_context_encode_file(ctx, src->path, &s, &st);
    pthread_mutex_unlock(&g->mu);
    Py_END_ALLOW_THREADS
    if (rc != QM_OK) {
        /* a failed encode (bad values, a backend error) drops its context: a backend that
         * failed is not handed to the next call; states made before keep their references */
        context_drop(ctx, g);
        return raise_status(&st, NULL);
    }
    group_retain(g); /* the state's reference; the cache keeps the other */
    cache_put(sc, &a->r, backend, ctx, g);
    PyObject *o = state_wrap(s, g, ndim, a->r.batch);
    if (o && interrupted()) {
        Py_DECREF(o);
        return NULL;
    }
    return o;
}

static int float_dtype(const char *name, qm_dtype *out)
{
    if (strcmp(name, "float64") == 0)
        *out = QM_DTYPE_FLOAT64;
    else if (strcmp(name, "float32") == 0)
        *out = QM_DTYPE_FLOAT32;
    else {
        PyErr_Format(PyExc_TypeError, "input dtype must be float32 or float64 (got %s)", name);
        return -1;
    }
    return 0;
}

PyDoc_STRVAR(encode_host_doc,
"encode_host(request..., backend, buffer, rows, features, in_dtype, ndim) -> State\n\n"
"Encode rows x features values of a C-contiguous float32/float64 buffer (use qmesh.encode()).");

static PyObject *py_encode_host(PyObject *m, PyObject *args)
{
    (void)m;
    req_args a;
    PyObject *req, *obj;
    const char *backend, *in_dtype;
    unsigned long long rows, features;
    int ndim;
    if (!PyArg_ParseTuple(args, "O!sOKKsi:encode_host", &PyTuple_Type, &req, &backend, &obj, &rows,
                          &features, &in_dtype, &ndim) ||
        parse_request(req, &a))
        return NULL;
    int badb;
    const qm_backend_kind bk = backend_of(backend, &badb);
    if (badb)
        return bad_backend(backend);
    source src = {.kind = 0};
    if (float_dtype(in_dtype, &src.data.dtype))
        return NULL;
    Py_buffer b;
    if (PyObject_GetBuffer(obj, &b, PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    const uint64_t need = rows * features * qm_dtype_size(src.data.dtype);
    if ((uint64_t)b.len != need) {
        PyBuffer_Release(&b);
        PyErr_Format(PyExc_ValueError, "the buffer has %zd bytes, not %llu rows x %llu values",
                     b.len, rows, features);
        return NULL;
    }
    src.data.data = b.buf;
    src.data.rows = rows;
    src.data.features = features;
    PyObject *o = encode_run(&a, bk, &src, ndim);
    PyBuffer_Release(&b);
    return o;
}

/* kDLCPU / kDLCUDA capsule: float32/float64, 1-D or 2-D, compact row-major. The capsule is
 * consumed (renamed "used_dltensor") and its deleter called after the encode. */
PyDoc_STRVAR(encode_dlpack_doc,
"encode_dlpack(request..., backend, capsule) -> State\n\n"
"Encode a DLPack tensor in place: kDLCUDA memory through qm_context_encode_device (never\n"
"copied through the host), kDLCPU memory as host rows (use qmesh.encode()).");

static PyObject *py_encode_dlpack(PyObject *m, PyObject *args)
{
    (void)m;
    req_args a;
    PyObject *req, *cap;
    const char *backend;
    if (!PyArg_ParseTuple(args, "O!sO:encode_dlpack", &PyTuple_Type, &req, &backend, &cap) ||
        parse_request(req, &a))
        return NULL;
    DLManagedTensor *t = PyCapsule_GetPointer(cap, "dltensor");
    if (!t)
        return NULL;
    const DLTensor *d = &t->dl_tensor;
    source src = {.kind = d->device.device_type == kDLCUDA ? 1 : 0};
    char why[160] = "";
    if (d->device.device_type != kDLCPU && d->device.device_type != kDLCUDA &&
        d->device.device_type != kDLCUDAHost && d->device.device_type != kDLCUDAManaged)
        snprintf(why, sizeof why, "device type %d (use CPU or CUDA memory)",
                 (int)d->device.device_type);
    else if (d->dtype.code != kDLFloat || d->dtype.lanes != 1 ||
             (d->dtype.bits != 32 && d->dtype.bits != 64))
        snprintf(why, sizeof why, "dtype code %d bits %d (float32 or float64 only)",
                 d->dtype.code, d->dtype.bits);
    else if (d->ndim != 1 && d->ndim != 2)
        snprintf(why, sizeof why, "%d dimensions (1 or 2 only)", d->ndim);
    if (!why[0] && d->strides) {
        int64_t expect = 1;
        for (int k = d->ndim - 1; k >= 0; --k) {
            if (d->shape[k] != 1 && d->strides[k] != expect)
                snprintf(why, sizeof why, "strides that are not row-major contiguous");
            expect *= d->shape[k];
        }
    }
    if (why[0]) {
        PyErr_Format(PyExc_TypeError, "encode: a DLPack tensor of %s", why);
        return NULL;
    }
    if (d->device.device_type == kDLCUDAManaged)
        src.kind = 1;
    src.data.dtype = d->dtype.bits == 64 ? QM_DTYPE_FLOAT64 : QM_DTYPE_FLOAT32;
    src.data.data = (const char *)d->data + d->byte_offset;
    src.data.rows = d->ndim == 2 ? (uint64_t)d->shape[0] : 1;
    src.data.features = (uint64_t)d->shape[d->ndim - 1];
    int badb;
    qm_backend_kind bk = backend_of(backend, &badb);
    if (badb)
        return bad_backend(backend);
    if (bk == QM_BACKEND_AUTO && src.kind == 1)
        bk = QM_BACKEND_CUDA;
    if (PyCapsule_SetName(cap, "used_dltensor") < 0)
        return NULL;
    PyObject *o = encode_run(&a, bk, &src, d->ndim);
    if (t->deleter)
        t->deleter(t);
    return o;
}

PyDoc_STRVAR(encode_file_doc,
"encode_file(request..., backend, path, ndim) -> State\n\n"
"Encode a .npy, CSV or .csv.gz file (use qmesh.encode()).");

static PyObject *py_encode_file(PyObject *m, PyObject *args)
{
    (void)m;
    req_args a;
    PyObject *req, *bytes = NULL;
    const char *backend;
    int ndim;
    if (!PyArg_ParseTuple(args, "O!sO&i:encode_file", &PyTuple_Type, &req, &backend,
                          PyUnicode_FSConverter, &bytes, &ndim))
        return NULL;
    if (parse_request(req, &a)) {
        Py_DECREF(bytes);
        return NULL;
    }
    int badb;
    source src = {.kind = 2, .path = PyBytes_AS_STRING(bytes)};
    const qm_backend_kind bk = backend_of(backend, &badb);
    PyObject *o = badb ? bad_backend(backend) : encode_run(&a, bk, &src, ndim);
    Py_DECREF(bytes);
    return o;
}

/* ---- Stream: qm_stream_* as a Python iterator of States ---------------------------------------
 * The stream's contexts are used by qm_stream_next and by the States it yields (reads, DLPack
 * deleters), possibly from several threads: all of them share one group mutex. qm_stream_next
 * runs without the GIL (it may wait for the reader thread). Host rows are kept (a Py_buffer)
 * until the stream is closed; a file is the library's to read. */

typedef struct {
    PyObject_HEAD
    qm_stream *s;
    group *g;
    Py_buffer buf;      /* host rows (buf.obj NULL for a file) */
    int ndim;           /* of the yielded States: the input's */
} StreamObject;

static PyTypeObject StreamType;

static void stream_close(StreamObject *self)
{
    if (self->s) {
        qm_stream *s = self->s;
        group *g = self->g;
        self->s = NULL;
        Py_BEGIN_ALLOW_THREADS
        pthread_mutex_lock(&g->mu);
        qm_stream_close(s);
        pthread_mutex_unlock(&g->mu);
        Py_END_ALLOW_THREADS
    }
    if (self->buf.obj)
        PyBuffer_Release(&self->buf);
}

static void Stream_dealloc(StreamObject *self)
{
    stream_close(self);
    group_release(self->g);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Stream_iter(PyObject *self)
{
    Py_INCREF(self);
    return self;
}

static PyObject *Stream_next(StreamObject *self)
{
    if (!self->s)
        return NULL; /* closed: StopIteration */
    qm_state *state = NULL;
    qm_status st;
    qm_code rc;
    qm_stream_info info;
    group *g = self->g;
    qm_stream *s = self->s;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&g->mu);
    rc = qm_stream_next(s, &state, &st);
    if (rc == QM_OK)
        qm_stream_info_query(s, &info, NULL);
    pthread_mutex_unlock(&g->mu);
    Py_END_ALLOW_THREADS
    if (rc != QM_OK)
        return raise_status(&st, NULL);
    if (!state)
        return NULL; /* the end: StopIteration */
    PyObject *o = state_wrap(state, group_retain(g), self->ndim, info.last_rows);
    if (o && interrupted()) {
        Py_DECREF(o);
        return NULL;
    }
    return o;
}

static PyObject *Stream_close(StreamObject *self, PyObject *u)
{
    (void)u;
    stream_close(self);
    Py_RETURN_NONE;
}

static PyObject *Stream_enter(PyObject *self, PyObject *u)
{
    (void)u;
    Py_INCREF(self);
    return self;
}

static PyObject *Stream_exit(StreamObject *self, PyObject *args)
{
    (void)args;
    stream_close(self);
    Py_RETURN_FALSE;
}

static PyObject *Stream_info(StreamObject *self, PyObject *u)
{
    (void)u;
    if (!self->s)
        return raise_code(QM_E_ARG, "stream: the stream is closed");
    qm_stream_info i;
    pthread_mutex_lock(&self->g->mu); /* short: no library wait inside */
    qm_stream_info_query(self->s, &i, NULL);
    pthread_mutex_unlock(&self->g->mu);
    return Py_BuildValue(
        "{s:K,s:K,s:i,s:I,s:s,s:K,s:K,s:K,s:K,s:K,s:K,s:i,s:K,s:K,s:d,s:d,s:d}", "samples",
        (unsigned long long)i.samples, "features", (unsigned long long)i.features, "input_ndim",
        i.input_ndim, "qubits", i.qubits, "dtype", qm_dtype_name(i.dtype), "batch_size",
        (unsigned long long)i.batch_size, "batches", (unsigned long long)i.batches,
        "batches_done", (unsigned long long)i.batches_done, "last_first_sample",
        (unsigned long long)i.last_first_sample, "last_rows", (unsigned long long)i.last_rows,
        "batch_input_bytes", (unsigned long long)i.batch_input_bytes, "input_buffers",
        i.input_buffers, "input_bytes_peak", (unsigned long long)i.input_bytes_peak,
        "device_bytes_peak", (unsigned long long)i.device_bytes_peak, "seconds_read",
        i.seconds_read, "seconds_wait", i.seconds_wait, "seconds_encode", i.seconds_encode);
}

static Py_ssize_t Stream_len(StreamObject *self)
{
    if (!self->s)
        return 0; /* closed: nothing left */
    qm_stream_info i;
    pthread_mutex_lock(&self->g->mu);
    qm_stream_info_query(self->s, &i, NULL);
    pthread_mutex_unlock(&self->g->mu);
    return (Py_ssize_t)i.batches;
}

static PyMethodDef Stream_methods[] = {
    {"close", (PyCFunction)Stream_close, METH_NOARGS,
     "Stop the reader and free the input buffers; States already yielded stay valid."},
    {"info", (PyCFunction)Stream_info, METH_NOARGS,
     "What the stream has done so far (qm_stream_info_query) as a dict."},
    {"__enter__", Stream_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)Stream_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL}};

static PySequenceMethods Stream_seq = {.sq_length = (lenfunc)Stream_len};

static PyTypeObject StreamType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "qmesh.Stream",
    .tp_basicsize = sizeof(StreamObject),
    .tp_dealloc = (destructor)Stream_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An iterator of States, one per batch (use qmesh.stream()). len() is the number of "
              "batches (0 once closed).",
    .tp_iter = Stream_iter,
    .tp_iternext = (iternextfunc)Stream_next,
    .tp_methods = Stream_methods,
    .tp_as_sequence = &Stream_seq,
};

PyDoc_STRVAR(stream_open_doc,
"stream_open(request..., backend, source, rows, features, in_dtype, ndim, batch_size, prefetch)\n"
"-> Stream\n\n"
"source: a path (str/bytes) read by the library, or a C-contiguous float32/float64 buffer of\n"
"rows x features values (use qmesh.stream()).");

static PyObject *py_stream_open(PyObject *m, PyObject *args)
{
    (void)m;
    req_args a;
    PyObject *req, *src;
    const char *backend, *in_dtype;
    unsigned long long rows, features, batch_size;
    int ndim, prefetch;
    if (!PyArg_ParseTuple(args, "O!sOKKsiKi:stream_open", &PyTuple_Type, &req, &backend, &src,
                          &rows, &features, &in_dtype, &ndim, &batch_size, &prefetch) ||
        parse_request(req, &a))
        return NULL;
    int badb;
    qm_stream_options o;
    qm_stream_options_init(&o);
    o.backend = backend_of(backend, &badb);
    if (badb)
        return bad_backend(backend);
    o.batch_size = batch_size;
    o.prefetch = prefetch;
    StreamObject *self = PyObject_New(StreamObject, &StreamType);
    if (!self)
        return NULL;
    self->s = NULL;
    self->ndim = ndim;
    memset(&self->buf, 0, sizeof self->buf);
    self->g = group_new();
    if (!self->g) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    PyObject *path = NULL;
    qm_host_data h = {0};
    if (PyUnicode_Check(src) || PyBytes_Check(src)) {
        if (!PyUnicode_FSConverter(src, &path)) {
            Py_DECREF(self);
            return NULL;
        }
    } else {
        if (float_dtype(in_dtype, &h.dtype) || PyObject_GetBuffer(src, &self->buf,
                                                                 PyBUF_C_CONTIGUOUS) < 0) {
            Py_DECREF(self);
            return NULL;
        }
        if ((uint64_t)self->buf.len != rows * features * qm_dtype_size(h.dtype)) {
            PyErr_Format(PyExc_ValueError, "the buffer has %zd bytes, not %llu rows x %llu values",
                         self->buf.len, rows, features);
            Py_DECREF(self);
            return NULL;
        }
        h.data = self->buf.buf;
        h.rows = rows;
        h.features = features;
    }
    const qm_scenario *sc = ((ScenarioObject *)a.scenario)->sc;
    const char *p = path ? PyBytes_AS_STRING(path) : NULL;
    qm_stream *s = NULL;
    qm_status st;
    qm_code rc;
    Py_BEGIN_ALLOW_THREADS
    rc = p ? qm_stream_open_file(sc, &a.r, p, &o, &s, &st)
           : qm_stream_open_host(sc, &a.r, &h, &o, &s, &st);
    Py_END_ALLOW_THREADS
    Py_XDECREF(path);
    if (rc != QM_OK) {
        Py_DECREF(self);
        return raise_status(&st, NULL);
    }
    self->s = s;
    return (PyObject *)self;
}

PyDoc_STRVAR(file_shape_doc,
"file_shape(path) -> (rows, features, ndim, dtype)\n\n"
"The shape of an input file as encode reads it (qm_input_file_shape).");

static PyObject *py_file_shape(PyObject *m, PyObject *path)
{
    (void)m;
    PyObject *bytes = NULL;
    if (!PyUnicode_FSConverter(path, &bytes))
        return NULL;
    uint64_t rows = 0, features = 0;
    int ndim = 0;
    qm_dtype dt = QM_DTYPE_FLOAT64;
    qm_status st;
    qm_code rc;
    const char *p = PyBytes_AS_STRING(bytes);
    Py_BEGIN_ALLOW_THREADS
    rc = qm_input_file_shape(p, &rows, &features, &ndim, &dt, &st);
    Py_END_ALLOW_THREADS
    Py_DECREF(bytes);
    if (rc != QM_OK)
        return raise_status(&st, NULL);
    return Py_BuildValue("(KKis)", (unsigned long long)rows, (unsigned long long)features, ndim,
                         qm_dtype_name(dt));
}

PyDoc_STRVAR(devices_doc,
"devices(backend='auto') -> list of dict\n\n"
"The devices `qmesh devices` lists: the visible CUDA GPUs, else the built-in simulated mesh.");

static PyObject *py_devices(PyObject *m, PyObject *args)
{
    (void)m;
    const char *backend = "auto";
    if (!PyArg_ParseTuple(args, "|s:devices", &backend))
        return NULL;
    int badb;
    const qm_backend_kind bk = backend_of(backend, &badb);
    if (badb)
        return bad_backend(backend);
    qm_device_info *d = NULL;
    int n = 0;
    qm_backend_kind listed = QM_BACKEND_SIM;
    qm_status st;
    qm_code rc;
    Py_BEGIN_ALLOW_THREADS
    rc = qm_devices_list(bk, &d, &n, &listed, &st);
    Py_END_ALLOW_THREADS
    if (rc != QM_OK)
        return raise_status(&st, NULL);
    PyObject *list = PyList_New(n);
    for (int i = 0; list && i < n; ++i) {
        PyObject *o = Py_BuildValue(
            "{s:i,s:s,s:s,s:K,s:K,s:d,s:i,s:s}", "index", d[i].index, "id", d[i].id, "name",
            d[i].name, "memory_bytes", (unsigned long long)d[i].memory_bytes, "usable_bytes",
            (unsigned long long)d[i].usable_bytes, "hbm_bw_bytes_per_s", d[i].hbm_bw_bytes_per_s,
            "cuda_device", d[i].cuda_device, "backend",
            listed == QM_BACKEND_CUDA ? "cuda" : "sim");
        if (!o) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, i, o);
    }
    qm_free(d);
    return list;
}

static PyObject *py_set_plan_factory(PyObject *m, PyObject *f)
{
    (void)m;
    Py_XDECREF(g_plan_factory);
    Py_INCREF(f);
    g_plan_factory = f;
    Py_RETURN_NONE;
}

static PyObject *py_raise(PyObject *m, PyObject *args)
{
    (void)m;
    const char *code, *msg;
    if (!PyArg_ParseTuple(args, "ss", &code, &msg))
        return NULL;
    for (int c = 0; c < QM_CODE_COUNT_; ++c)
        if (strcmp(qm_code_name((qm_code)c), code) == 0)
            return raise_code((qm_code)c, msg);
    PyErr_Format(PyExc_ValueError, "unknown code %s", code);
    return NULL;
}

static PyMethodDef module_methods[] = {
    {"plan_json", py_plan_json, METH_VARARGS, plan_json_doc},
    {"encode_host", py_encode_host, METH_VARARGS, encode_host_doc},
    {"encode_dlpack", py_encode_dlpack, METH_VARARGS, encode_dlpack_doc},
    {"encode_file", py_encode_file, METH_VARARGS, encode_file_doc},
    {"file_shape", py_file_shape, METH_O, file_shape_doc},
    {"stream_open", py_stream_open, METH_VARARGS, stream_open_doc},
    {"devices", py_devices, METH_VARARGS, devices_doc},
    {"clear_cache", py_clear_cache, METH_NOARGS, clear_cache_doc},
    {"cache_info", py_cache_info, METH_NOARGS, cache_info_doc},
    {"_set_plan_factory", py_set_plan_factory, METH_O, "Set the callable that makes Error.plan."},
    {"_raise", py_raise, METH_VARARGS,
     "_raise(code, message): raise qmesh.Error/RunError as the library would."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "qmesh._qmesh",
    "qmesh's C extension over the public C API (include/qmesh.h); use the qmesh package.", -1,
    module_methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__qmesh(void)
{
    if (PyType_Ready(&ScenarioType) < 0 || PyType_Ready(&StateType) < 0 ||
        PyType_Ready(&ShardType) < 0 || PyType_Ready(&StreamType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (!m)
        return NULL;
    const char *cache = getenv("QMESH_CONTEXT_CACHE");
    g_cache_on = !(cache && strcmp(cache, "0") == 0);
    g_error = PyErr_NewExceptionWithDoc(
        "qmesh.Error",
        "A qmesh error: .code is the stable name ('E-CAPACITY', ...), .message (and str()) the\n"
        "one line the CLI prints, .plan the infeasible Plan when encode could not place the state.",
        PyExc_ValueError, NULL);
    PyObject *bases = g_error ? PyTuple_Pack(2, g_error, PyExc_RuntimeError) : NULL;
    g_run_error = bases ? PyErr_NewExceptionWithDoc(
                              "qmesh.RunError",
                              "A runtime failure (E-BACKEND, E-NOMEM, E-IO, E-UNSUPPORTED, "
                              "E-NUMERIC, E-INTERNAL,\nE-OUTPUT, E-INTERRUPTED): a qmesh.Error "
                              "that is also a RuntimeError.",
                              bases, NULL)
                        : NULL;
    Py_XDECREF(bases);
    if (!g_run_error || PyModule_AddObjectRef(m, "Error", g_error) < 0 ||
        PyModule_AddObjectRef(m, "RunError", g_run_error) < 0 ||
        PyModule_AddObjectRef(m, "Scenario", (PyObject *)&ScenarioType) < 0 ||
        PyModule_AddObjectRef(m, "State", (PyObject *)&StateType) < 0 ||
        PyModule_AddObjectRef(m, "Shard", (PyObject *)&ShardType) < 0 ||
        PyModule_AddObjectRef(m, "Stream", (PyObject *)&StreamType) < 0 ||
        PyModule_AddIntConstant(m, "VERSION_MAJOR", QM_VERSION_MAJOR) < 0 ||
        PyModule_AddIntConstant(m, "VERSION_MINOR", QM_VERSION_MINOR) < 0 ||
        PyModule_AddIntConstant(m, "VERSION_PATCH", QM_VERSION_PATCH) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
