/* The word search's scoring loop (index/words.py), in C so that it runs without the GIL:
 * a hybrid knowledge search ranks by words on the event loop while its vector half runs in
 * faiss on a thread, and in Python the two took turns holding the interpreter.
 *
 * best_rows(parts, scores, alive, out_rows, out_scores) -> int
 *
 *   parts       a sequence of (rows, weights, idf, makes_candidates): one posting list (rows
 *               int32 ascending, their BM25 weights before idf float32) of one query word in
 *               one segment. A list that makes candidates adds its rows; the others only add
 *               to rows already found (an agent's very common words never find a row alone).
 *   scores      float32, a slot per row, all zero; left all zero again.
 *   alive       bool, a flag per row: removed rows are never returned.
 *   out_rows    int64, as long as the number of rows wanted (k).
 *   out_scores  float32, as long as out_rows.
 *
 * Returns how many rows it wrote (at most k): the rows of the k highest scores (sum of idf x
 * weight over the parts holding them), in no order; which of rows tied at the k-th score are
 * kept is not specified. Work: one pass over every posting of every part making candidates,
 * over the others or a lookup of each row found in them (whichever is cheaper), then over
 * the rows found (a heap of k). The caller holds the index's lock, so nothing changes the arrays while
 * the GIL is released. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    Py_buffer rows;
    Py_buffer weights;
    float idf;
    int makes_candidates;
} Part;

/* A min-heap of (score, row) on score: the root is the lowest of the best k so far. */
static void sift_down(float *score, int64_t *row, Py_ssize_t size, Py_ssize_t at) {
    for (;;) {
        Py_ssize_t low = at, left = 2 * at + 1, right = left + 1;
        if (left < size && score[left] < score[low]) low = left;
        if (right < size && score[right] < score[low]) low = right;
        if (low == at) return;
        float s = score[at];
        score[at] = score[low];
        score[low] = s;
        int64_t r = row[at];
        row[at] = row[low];
        row[low] = r;
        at = low;
    }
}

/* `kinds`: the struct format characters accepted for items of `itemsize` bytes (an int32 is
 * 'i' where a C long has 8 bytes, 'l' where it has 4). */
static int get_buffer(PyObject *obj, Py_buffer *view, const char *kinds, Py_ssize_t itemsize, int writable,
                      const char *what) {
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, view, flags) < 0) return -1;
    const char *format = view->format == NULL ? "B" : view->format;
    if (*format == '@' || *format == '=' || *format == '<') format++;
    if (view->itemsize != itemsize || format[0] == '\0' || format[1] != '\0' || strchr(kinds, format[0]) == NULL) {
        PyErr_Format(PyExc_TypeError, "%s: expected items of %zd bytes, one of the formats '%s'", what, itemsize,
                     kinds);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

static void release_parts(Part *parts, Py_ssize_t count) {
    for (Py_ssize_t i = 0; i < count; i++) {
        PyBuffer_Release(&parts[i].rows);
        PyBuffer_Release(&parts[i].weights);
    }
}

static int read_part(PyObject *item, Part *part) {
    PyObject *rows, *weights;
    double idf;
    int makes_candidates;
    if (!PyTuple_Check(item)) {
        PyErr_SetString(PyExc_TypeError, "a part must be a tuple (rows, weights, idf, makes_candidates)");
        return -1;
    }
    if (!PyArg_ParseTuple(item, "OOdp", &rows, &weights, &idf, &makes_candidates)) return -1;
    if (get_buffer(rows, &part->rows, "il", 4, 0, "rows") < 0) return -1;
    if (get_buffer(weights, &part->weights, "f", 4, 0, "weights") < 0) {
        PyBuffer_Release(&part->rows);
        return -1;
    }
    if (part->weights.len != part->rows.len) {
        PyErr_SetString(PyExc_ValueError, "a posting list's rows and weights differ in length");
        PyBuffer_Release(&part->rows);
        PyBuffer_Release(&part->weights);
        return -1;
    }
    part->idf = (float)idf;
    part->makes_candidates = makes_candidates;
    return 0;
}

/* Adds a part that makes no candidates to the rows found: each found row looked up in the
 * part's ascending rows, when that is cheaper than a pass over them (a rare word beside 31 of
 * an agent's stop words, each in most of its rows, looks up a few rows 31 times). Reads stay
 * within the part; the only slots written are found rows, whose bounds were checked. */
static void add_to_found(const Part *part, float *scores, const int32_t *found, Py_ssize_t found_count) {
    const int32_t *rows = part->rows.buf;
    const float *weights = part->weights.buf;
    Py_ssize_t n = part->rows.len / 4;
    for (Py_ssize_t j = 0; j < found_count; j++) {
        int32_t r = found[j];
        Py_ssize_t low = 0, high = n;
        while (low < high) {
            Py_ssize_t middle = low + (high - low) / 2;
            if (rows[middle] < r)
                low = middle + 1;
            else
                high = middle;
        }
        if (low < n && rows[low] == r) scores[r] += part->idf * weights[low];
    }
}

static int lookups_are_cheaper(Py_ssize_t found_count, Py_ssize_t n) {
    int depth = 1;
    for (Py_ssize_t left = n; left > 1; left >>= 1) depth++;
    return found_count * depth < n;
}

/* Adds every part to `scores`, noting each row found first in `found` (`*found_count` of
 * them). Returns 0, or -1 at a row with no slot in `scores`: checked here, one comparison a
 * posting, so that nothing is read or written outside of it whatever the caller passed. */
static int accumulate(const Part *parts, Py_ssize_t count, float *scores, Py_ssize_t row_count, int32_t *found,
                      Py_ssize_t *found_count) {
    for (int pass = 1; pass >= 0; pass--) { /* the parts making candidates first */
        for (Py_ssize_t p = 0; p < count; p++) {
            if (parts[p].makes_candidates != pass) continue;
            const int32_t *rows = parts[p].rows.buf;
            const float *weights = parts[p].weights.buf;
            Py_ssize_t n = parts[p].rows.len / 4;
            float idf = parts[p].idf;
            if (!pass && lookups_are_cheaper(*found_count, n)) {
                add_to_found(&parts[p], scores, found, *found_count);
                continue;
            }
            for (Py_ssize_t i = 0; i < n; i++) {
                int32_t r = rows[i];
                if (r < 0 || r >= row_count) return -1;
                if (scores[r] == 0.0f) {
                    if (!pass) continue; /* weights are positive: zero is a row not found */
                    found[(*found_count)++] = r;
                }
                scores[r] += idf * weights[i];
            }
        }
    }
    return 0;
}

/* The k best of the rows found, into out_*; every score slot is zero again after. */
static Py_ssize_t select_best(float *scores, const int32_t *found, Py_ssize_t found_count, const uint8_t *alive,
                              Py_ssize_t k, int64_t *out_rows, float *out_scores) {
    Py_ssize_t size = 0;
    for (Py_ssize_t i = 0; i < found_count; i++) {
        int32_t r = found[i];
        float s = scores[r];
        scores[r] = 0.0f;
        if (!alive[r]) continue;
        if (size < k) {
            out_scores[size] = s;
            out_rows[size] = r;
            size++;
            if (size == k)
                for (Py_ssize_t at = k / 2; at-- > 0;) sift_down(out_scores, out_rows, k, at);
        } else if (k > 0 && s > out_scores[0]) {
            out_scores[0] = s;
            out_rows[0] = r;
            sift_down(out_scores, out_rows, k, 0);
        }
    }
    return size;
}

/* The parts read, scored and released; NULL with an exception set when one is malformed. */
static PyObject *score_parts(PyObject *sequence, Py_buffer *scores, Py_buffer *alive, Py_buffer *out_rows,
                             Py_buffer *out_scores) {
    Py_ssize_t count = PySequence_Fast_GET_SIZE(sequence), read = 0, candidate_postings = 0, written = 0;
    Py_ssize_t row_count = scores->len / 4, k = out_rows->len / 8;
    PyObject *result = NULL;
    int32_t *found = NULL;
    Part *parts = PyMem_Calloc((size_t)count + 1, sizeof(Part));
    if (parts == NULL) return PyErr_NoMemory();
    for (; read < count; read++) {
        if (read_part(PySequence_Fast_GET_ITEM(sequence, read), &parts[read]) < 0) goto release;
        if (parts[read].makes_candidates) candidate_postings += parts[read].rows.len / 4;
    }
    /* a row is found through a posting of a part making candidates, one at most each */
    found = PyMem_RawMalloc(sizeof(int32_t) * ((size_t)candidate_postings + 1));
    if (found == NULL) {
        PyErr_NoMemory();
        goto release;
    }
    int bad_row;
    Py_ssize_t found_count = 0;
    Py_BEGIN_ALLOW_THREADS
    bad_row = accumulate(parts, count, scores->buf, row_count, found, &found_count);
    /* on a bad row no row is kept (k = 0), but every slot written is zero again */
    written = select_best(scores->buf, found, found_count, alive->buf, bad_row ? 0 : k, out_rows->buf,
                          out_scores->buf);
    Py_END_ALLOW_THREADS
    PyMem_RawFree(found);
    if (bad_row)
        PyErr_SetString(PyExc_ValueError, "a posting list names a row with no slot in scores");
    else
        result = PyLong_FromSsize_t(written);
release:
    release_parts(parts, read);
    PyMem_Free(parts);
    return result;
}

static PyObject *best_rows(PyObject *Py_UNUSED(module), PyObject *args) {
    PyObject *parts_in, *scores_in, *alive_in, *out_rows_in, *out_scores_in, *sequence, *result = NULL;
    Py_buffer scores, alive, out_rows, out_scores;
    if (!PyArg_ParseTuple(args, "OOOOO", &parts_in, &scores_in, &alive_in, &out_rows_in, &out_scores_in))
        return NULL;
    if (get_buffer(scores_in, &scores, "f", 4, 1, "scores") < 0) return NULL;
    if (get_buffer(alive_in, &alive, "?", 1, 0, "alive") < 0) goto no_alive;
    if (get_buffer(out_rows_in, &out_rows, "lq", 8, 1, "out_rows") < 0) goto no_out_rows;
    if (get_buffer(out_scores_in, &out_scores, "f", 4, 1, "out_scores") < 0) goto no_out_scores;
    if (alive.len != scores.len / 4 || out_scores.len / 4 != out_rows.len / 8) {
        PyErr_SetString(PyExc_ValueError, "scores and alive must have a slot per row, out_rows and out_scores k");
    } else if ((sequence = PySequence_Fast(parts_in, "parts must be a sequence")) != NULL) {
        result = score_parts(sequence, &scores, &alive, &out_rows, &out_scores);
        Py_DECREF(sequence);
    }
    PyBuffer_Release(&out_scores);
no_out_scores:
    PyBuffer_Release(&out_rows);
no_out_rows:
    PyBuffer_Release(&alive);
no_alive:
    PyBuffer_Release(&scores);
    return result;
}

static PyMethodDef methods[] = {
    {"best_rows", best_rows, METH_VARARGS,
     "best_rows(parts, scores, alive, out_rows, out_scores) -> int: the rows of the k best BM25 "
     "scores (see the module's source), computed without the GIL."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    .m_base = PyModuleDef_HEAD_INIT,
    .m_name = "_postings",
    .m_doc = "The word search's scoring loop, without the GIL.",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__postings(void) { return PyModule_Create(&module); }
