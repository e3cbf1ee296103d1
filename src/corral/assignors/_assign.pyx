# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False
"""The built-in server-side assignors, `uniform` and `range` (registered as `corral._core._assign`).

Both take the group as `corral.assignors` describes it (members: member id -> an object with
`subscribed_topic_ids`, `assignment`, `instance_id`; the subscription type; partition counts) and
return a TargetAssignment: a read-only Mapping of member id -> MemberAssignment (topic id ->
ascending tuple of partitions), every member present. It is a few flat arrays; member objects and
tuples are made when first read. Given back as the members' previous assignments (the usual next
step), it is read from its arrays: a big group's next assignment makes no Python object per
partition either way.

Python objects are read into flat C arrays first (members and topics become indices); the
assignment itself runs on those arrays without the GIL, so a big group can be assigned in a worker
thread while the event loop serves other groups.

`uniform` (balance first, then stickiness):
  1. Per topic, every subscriber gets `quota = partitions // subscribers` partitions, and
     `partitions % subscribers` of them one more (an "extra"). So members subscribed to a topic
     differ by at most one partition of it.
  2. Members with identical subscriptions form a class. A class's extras are spread so that its
     members' totals differ by at most one too (a homogeneous group is one class, so every total
     does). Where several classes share a topic, its extras are split between them so that the
     totals are as even as per-topic balance allows (uniform_classes.pxi).
  3. Stickiness decides who gets the extras. A member that held more than a topic's quota is
     its "candidate": with the extra it keeps quota + 1 partitions of it, without, quota. This
     is a min-cost flow (uniform_paths.pxi): the candidates get as many extras as the totals
     allow (greedily, then by augmenting paths, as in a bipartite matching); the rest go to
     members still short, rotating over the topics, and where no member with room lacks an open
     topic, along cheapest augmenting paths. Then everyone keeps its previous partitions up to
     its target, and only the partitions over a target, and unowned ones, move: the fewest any
     assignment balanced this way can move (tests/unit/assignors/test_properties.py checks it
     against an exact min-cost flow).
Kafka's UniformAssignor balances members' totals only (heterogeneous: as well as it can), so one
member may hold a whole topic while another holds none of it; corral keeps each topic spread too.
Where choices tie, members are taken in input order and topics in sorted order (never in a set's
iteration order, which follows str/bytes hashes, seeded per process): the same input gives the
same assignment in every process.

`range` is Kafka's RangeAssignor exactly (4.x, stateless): members sorted (static members by
instance id first, then dynamic ones by member id, as Java compares strings), then each topic cut
into contiguous ranges, the first `partitions % subscribers` members taking one more.
"""

cimport cython
from cpython.ref cimport PyObject, Py_DECREF
from libc.stdlib cimport malloc, calloc, free, qsort
from libc.string cimport memset, memcmp, memcpy
from libc.stdint cimport uintptr_t, int64_t, uint64_t

cdef extern from "Python.h":
    # Limited-API functions, declared on raw pointers so that references are managed explicitly.
    PyObject* PyTuple_New(Py_ssize_t size)
    int PyTuple_SetItem(PyObject* tuple, Py_ssize_t pos, PyObject* item)  # steals item
    PyObject* PyTuple_GetItem(PyObject* tuple, Py_ssize_t pos)            # borrowed
    Py_ssize_t PyTuple_Size(PyObject* tuple)
    bint PyTuple_CheckExact(PyObject* obj)
    PyObject* PyLong_FromLong(long value)
    void PyObject_GC_UnTrack(void* obj)
    long PyLong_AsLong(PyObject* obj) except? -1
    const char* PyUnicode_AsUTF8AndSize(object text, Py_ssize_t* size) except NULL
    int PyBytes_AsStringAndSize(object data, char** buffer, Py_ssize_t* length) except -1
    PyObject* PyDict_GetItemWithError(object mapping, object key) except? NULL  # borrowed
    list PyDict_Keys(object mapping)
    list PyDict_Values(object mapping)

# The parts, in order (one module, split by `include` to keep each file short).
include "memory.pxi"
include "results.pxi"
include "group.pxi"
include "previous.pxi"
include "uniform_classes.pxi"
include "uniform_extras.pxi"
include "uniform_moves.pxi"
include "uniform_paths.pxi"
include "range.pxi"
