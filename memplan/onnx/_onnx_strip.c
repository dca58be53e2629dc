/* The weightless ONNX reader's field walk (memplan.onnx.onnx_weightless) in C.
 *
 * A Python loop costs about a microsecond a protobuf field, so a file of millions of tiny
 * fields took seconds where protobuf's own parser takes milliseconds. This walk does what
 * `onnx_weightless._stripped` does, at the speed of a memory scan:
 *
 *   model ─ graph ─ initializer ─ dims, data_type, name ... raw_data (skipped)
 *         │       └ node ─ attribute ─ t / tensors (as initializers), g / graphs (as graph)
 *         └ functions ─ node ...
 *
 * - a field is copied as it is, unless it is a message on the path to the tensors (the
 *   `children` table, given by Python) longer than `inline` bytes: that one is entered,
 *   and written back with its new length;
 * - a tensor's data fields are left out, unless `keeps` says shape inference may read
 *   them (the same rule as `onnx_weightless.keeps_values`: data of at most `inline`
 *   bytes, or an INT32/INT64 vector or scalar of at most `shape_values` elements);
 * - nesting deeper than `max_depth` entered messages is refused, as protobuf refuses it.
 *
 * Cost: O(bytes outside skipped data), memory: the output (the model without its
 * weights' data) plus one buffer per nesting level.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define KINDS 8
#define NUMBERS 64 /* field numbers of the path are all below this */
#define LEN 2

typedef struct {
    signed char child[KINDS][NUMBERS]; /* kind -> field number -> child kind, or -1 */
    uint64_t data_fields;              /* bit n: field n of a tensor holds its data */
    int tensor;                        /* the kind that is a TensorProto */
    uint64_t inline_bytes, shape_values;
    unsigned char bits[256];           /* element type -> bits of one element (0: unknown) */
    int max_depth;
    const char *error;
} Walk;

typedef struct {
    unsigned char *data;
    size_t len, cap;
} Out;

static int put(Out *out, const void *bytes, size_t n) {
    if (out->len + n > out->cap) {
        size_t cap = out->cap ? out->cap : 4096;
        while (cap < out->len + n) cap *= 2;
        unsigned char *grown = PyMem_RawRealloc(out->data, cap);
        if (!grown) return -1;
        out->data = grown;
        out->cap = cap;
    }
    memcpy(out->data + out->len, bytes, n);
    out->len += n;
    return 0;
}

static int put_varint(Out *out, uint64_t value) {
    unsigned char bytes[10];
    int n = 0;
    while (value >= 0x80) {
        bytes[n++] = (unsigned char)(value & 0x7F) | 0x80;
        value >>= 7;
    }
    bytes[n++] = (unsigned char)value;
    return put(out, bytes, n);
}

static int varint(const unsigned char *p, size_t end, size_t *pos, uint64_t *value) {
    uint64_t result = 0;
    for (int shift = 0; shift <= 63; shift += 7) {
        if (*pos >= end) return -1;
        unsigned char byte = p[(*pos)++];
        result |= (uint64_t)(byte & 0x7F) << shift;
        if (byte < 0x80) {
            *value = result;
            return 0;
        }
    }
    return -1;
}

/* A tensor's element count so far: saturates at UINT64_MAX; a negative dim makes it so. */
static void dimension(uint64_t *count, uint64_t *rank, uint64_t dim) {
    (*rank)++;
    if ((int64_t)dim < 0) {
        *count = UINT64_MAX;
    } else if (dim != 0 && *count > UINT64_MAX / dim) {
        *count = UINT64_MAX;
    } else {
        *count *= dim;
    }
}

static int keeps(const Walk *w, uint64_t type, uint64_t rank, uint64_t count) {
    uint64_t bits = type < 256 && w->bits[type] ? w->bits[type] : 64;
    if (count <= w->inline_bytes * 8 / bits) return 1; /* at most `inline` bytes */
    return (type == 6 || type == 7) && rank <= 1 && count <= w->shape_values; /* INT32, INT64 */
}

typedef struct {
    size_t start, stop;
} Range;

static int strip(Walk *w, const unsigned char *p, size_t pos, size_t end, int kind, int depth,
                 Out *out) {
    Range *skipped = NULL;
    size_t nskipped = 0, capskipped = 0;
    uint64_t type = 0, rank = 0, count = 1;
    int result = -1;
    if (depth > w->max_depth) {
        w->error = "messages nested too deeply";
        return -1;
    }
    while (pos < end) {
        size_t start = pos, payload;
        uint64_t key, size = 0, value = 0;
        if (varint(p, end, &pos, &key)) goto corrupt;
        uint64_t number = key >> 3, wire = key & 7;
        if (number == 0) {
            w->error = "field number 0";
            goto fail;
        }
        if (wire == LEN) {
            if (varint(p, end, &pos, &size)) goto corrupt;
        } else if (wire == 0) {
            if (varint(p, end, &pos, &value)) goto corrupt;
        } else if (wire == 1 || wire == 5) {
            size = wire == 1 ? 8 : 4;
        } else {
            w->error = "a field of an unknown wire type";
            goto fail;
        }
        payload = pos;
        if (size > end - payload) {
            w->error = "a field runs past the end of its message";
            goto fail;
        }
        size_t stop = payload + (size_t)size;
        int child = number < NUMBERS ? w->child[kind][number] : -1;
        if (kind == w->tensor && number < NUMBERS && (w->data_fields >> number & 1)) {
            if (nskipped == capskipped) {
                capskipped = capskipped ? 2 * capskipped : 4;
                Range *grown = PyMem_RawRealloc(skipped, capskipped * sizeof(Range));
                if (!grown) goto nomemory;
                skipped = grown;
            }
            skipped[nskipped].start = start;
            skipped[nskipped++].stop = stop;
        } else if (child >= 0 && wire == LEN && size > w->inline_bytes) {
            Out inner = {NULL, 0, 0};
            if (strip(w, p, payload, stop, child, depth + 1, &inner) ||
                put_varint(out, number << 3 | LEN) || put_varint(out, inner.len) ||
                (inner.len && put(out, inner.data, inner.len))) {
                PyMem_RawFree(inner.data);
                if (!w->error) goto nomemory;
                goto fail;
            }
            PyMem_RawFree(inner.data);
        } else if (put(out, p + start, stop - start)) {
            goto nomemory;
        }
        if (kind == w->tensor && number == 2 && wire == 0) {
            type = value; /* data_type */
        } else if (kind == w->tensor && number == 1) { /* dims, unpacked or packed */
            if (wire == 0) {
                dimension(&count, &rank, value);
            } else if (wire == LEN) {
                size_t at = payload;
                while (at < stop) {
                    if (varint(p, stop, &at, &value)) goto corrupt;
                    dimension(&count, &rank, value);
                }
            }
        }
        pos = stop;
    }
    if (nskipped && keeps(w, type, rank, count)) {
        for (size_t i = 0; i < nskipped; i++)
            if (put(out, p + skipped[i].start, skipped[i].stop - skipped[i].start))
                goto nomemory;
    }
    result = 0;
    goto fail;
corrupt:
    w->error = "a number runs past the end of its message";
    goto fail;
nomemory:
    w->error = "out of memory";
fail:
    PyMem_RawFree(skipped);
    return result;
}

/* strip(data, children, data_fields, tensor, inline, shape_values, bits, max_depth) -> bytes
 * children: (kind, field number, child kind) triples; bits: element type -> bits (bytes). */
static PyObject *py_strip(PyObject *self, PyObject *args) {
    Py_buffer data, bits;
    PyObject *children, *result = NULL;
    unsigned long long data_fields, inline_bytes, shape_values;
    int tensor, max_depth;
    Walk w;
    Out out = {NULL, 0, 0};
    if (!PyArg_ParseTuple(args, "y*OKiKKy*i", &data, &children, &data_fields, &tensor,
                          &inline_bytes, &shape_values, &bits, &max_depth))
        return NULL;
    memset(&w, 0, sizeof w);
    memset(w.child, -1, sizeof w.child);
    w.data_fields = data_fields;
    w.tensor = tensor;
    w.inline_bytes = inline_bytes;
    w.shape_values = shape_values;
    w.max_depth = max_depth;
    memcpy(w.bits, bits.buf, bits.len < 256 ? (size_t)bits.len : 256);
    PyObject *items = PySequence_Fast(children, "children must be a sequence");
    if (!items) goto done;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(items); i++) {
        int kind, number, child;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(items, i), "iii", &kind, &number, &child))
            break;
        if (kind < 0 || kind >= KINDS || child < 0 || child >= KINDS || number <= 0 ||
            number >= NUMBERS) {
            PyErr_SetString(PyExc_ValueError, "children: kind or field number out of range");
            break;
        }
        w.child[kind][number] = (signed char)child;
    }
    Py_DECREF(items);
    if (PyErr_Occurred()) goto done;
    int failed;
    Py_BEGIN_ALLOW_THREADS
    failed = strip(&w, data.buf, 0, (size_t)data.len, 0, 0, &out);
    Py_END_ALLOW_THREADS
    if (failed) {
        if (w.error && strcmp(w.error, "out of memory") == 0)
            PyErr_NoMemory();
        else
            PyErr_SetString(PyExc_ValueError, w.error ? w.error : "corrupted");
    } else {
        result = PyBytes_FromStringAndSize((const char *)out.data, (Py_ssize_t)out.len);
    }
done:
    PyMem_RawFree(out.data);
    PyBuffer_Release(&data);
    PyBuffer_Release(&bits);
    return result;
}

/* ---------------------------------------------------------------- before parsing
 * Protobuf's Python parser hands an ONNX text field (proto2: never checked) that is not
 * UTF-8 back as bytes, not str; names that are bytes would surface anywhere later. And a
 * message parsed takes a hundred bytes or more, however few it has in the file (an empty
 * attribute: two bytes). The whole model (without weights) is walked here at once, against
 * a table of every message type's text and message fields (built by Python from onnx's
 * descriptors): the first text field that is not UTF-8, and what the messages will cost. */
#define TEXT -1
#define OTHER -2

typedef struct {
    signed char (*field)[NUMBERS]; /* type -> number -> child type, TEXT or OTHER */
    int types;
    const uint64_t *cost;          /* type -> bytes one message of it takes once parsed */
    uint64_t total;                /* the messages' cost so far */
    int path[128][2];              /* (type, number) of the fields down to the bad one */
    int depth;
} Schema;

static int utf8(const unsigned char *p, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned char c = p[i];
        if (c < 0x80) { i++; continue; }
        int more;
        uint32_t cp;
        if (c >= 0xC2 && c <= 0xDF) { more = 1; cp = c & 0x1F; }
        else if (c >= 0xE0 && c <= 0xEF) { more = 2; cp = c & 0x0F; }
        else if (c >= 0xF0 && c <= 0xF4) { more = 3; cp = c & 0x07; }
        else return 0;
        if (n - i <= (size_t)more) return 0;
        for (int k = 1; k <= more; k++) {
            if ((p[i + k] & 0xC0) != 0x80) return 0;
            cp = cp << 6 | (p[i + k] & 0x3F);
        }
        if ((more == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
            (more == 3 && (cp < 0x10000 || cp > 0x10FFFF)))
            return 0;
        i += more + 1;
    }
    return 1;
}

/* 0: every text field is UTF-8; 1: one is not (its path in schema->path); -1: corrupted. */
static int check_text(Schema *schema, const unsigned char *p, size_t pos, size_t end, int type,
                      int depth) {
    schema->depth = depth;
    if (depth >= 128) return -1;
    while (pos < end) {
        uint64_t key, size = 0, value;
        schema->depth = depth;
        if (varint(p, end, &pos, &key)) return -1;
        uint64_t number = key >> 3, wire = key & 7;
        schema->path[depth][0] = type;
        schema->path[depth][1] = number < NUMBERS ? (int)number : -1;
        schema->depth = depth + 1;
        if (number == 0) return -1;
        if (wire == LEN) {
            if (varint(p, end, &pos, &size) || size > end - pos) return -1;
        } else if (wire == 0) {
            if (varint(p, end, &pos, &value)) return -1;
        } else if (wire == 1 || wire == 5) {
            size = wire == 1 ? 8 : 4;
            if (size > end - pos) return -1;
        } else {
            return -1;
        }
        int kind = number < NUMBERS && wire == LEN ? schema->field[type][number] : OTHER;
        if (kind == TEXT && !utf8(p + pos, (size_t)size)) return 1;
        if (kind >= 0) {
            schema->total += schema->cost[kind];
            int found = check_text(schema, p, pos, pos + (size_t)size, kind, depth + 1);
            if (found) return found;
        }
        pos += (size_t)size;
    }
    return 0;
}

/* check(data, fields, costs) -> (finding, path, cost): finding is None, "text" (a text
 * field that is not UTF-8) or "corrupt" (bytes that are no protobuf message); path the
 * ((type, number), ...) fields down to it (number -1: one past the table), where the walk
 * stopped; cost the sum of the costs of the messages walked. fields: int16 triples (type,
 * number, child type or -1 for text), type 0 the model; costs: bytes per message of each
 * type (uint64). Both arrays are built once by Python. */
static PyObject *py_check(PyObject *self, PyObject *args) {
    Py_buffer data, fields, costs;
    PyObject *result = NULL, *path = NULL;
    Schema schema;
    if (!PyArg_ParseTuple(args, "y*y*y*", &data, &fields, &costs)) return NULL;
    memset(&schema, 0, sizeof schema);
    const int16_t *rows = fields.buf;
    Py_ssize_t count = fields.len / (Py_ssize_t)(3 * sizeof(int16_t));
    schema.types = 1;
    for (Py_ssize_t i = 0; i < count; i++) {
        int type = rows[3 * i], child = rows[3 * i + 2];
        if (type < 0 || child < TEXT) {
            PyErr_SetString(PyExc_ValueError, "fields: a type out of range");
            goto release;
        }
        if (type + 1 > schema.types) schema.types = type + 1;
        if (child + 1 > schema.types) schema.types = child + 1;
    }
    if ((size_t)costs.len < schema.types * sizeof(uint64_t)) {
        PyErr_SetString(PyExc_ValueError, "costs: one per type");
        goto release;
    }
    schema.cost = costs.buf;
    schema.field = PyMem_RawMalloc(sizeof(*schema.field) * schema.types);
    if (!schema.field) {
        PyErr_NoMemory();
        goto release;
    }
    memset(schema.field, OTHER, sizeof(*schema.field) * schema.types);
    for (Py_ssize_t i = 0; i < count; i++) {
        int number = rows[3 * i + 1];
        if (number > 0 && number < NUMBERS)
            schema.field[rows[3 * i]][number] = (signed char)rows[3 * i + 2];
    }
    int found;
    Py_BEGIN_ALLOW_THREADS
    found = check_text(&schema, data.buf, 0, (size_t)data.len, 0, 0);
    Py_END_ALLOW_THREADS
    if (found == 0) {
        result = Py_BuildValue("(OOK)", Py_None, Py_None, (unsigned long long)schema.total);
    } else {
        path = PyTuple_New(schema.depth);
        for (int i = 0; path && i < schema.depth; i++) {
            PyObject *step = Py_BuildValue("(ii)", schema.path[i][0], schema.path[i][1]);
            if (!step) Py_CLEAR(path);
            else PyTuple_SET_ITEM(path, i, step);
        }
        if (path)
            result = Py_BuildValue("(sNK)", found > 0 ? "text" : "corrupt", path,
                                   (unsigned long long)schema.total);
    }
    PyMem_RawFree(schema.field);
release:
    PyBuffer_Release(&data);
    PyBuffer_Release(&fields);
    PyBuffer_Release(&costs);
    return result;
}

static PyMethodDef methods[] = {
    {"strip", py_strip, METH_VARARGS, "A serialized ModelProto without its large tensors' data."},
    {"check", py_check, METH_VARARGS, "A field not UTF-8 or not well-formed; the messages' cost."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_onnx_strip",
                                    "The weightless ONNX reader's field walk in C.", -1, methods};

PyMODINIT_FUNC PyInit__onnx_strip(void) { return PyModule_Create(&module); }
