# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
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
     does). Where several classes share a topic, its extras go to the least loaded classes.
  3. Stickiness decides who gets the extras. A member that held more than a topic's quota is
     its "candidate": with the extra it keeps quota + 1 partitions of it, without, quota. The
     candidates get as many extras as the totals allow (greedily, then by augmenting paths, as
     in a bipartite matching); the rest go to members still short, rotating over the topics;
     where that gets stuck, swaps that move nothing more. Then everyone keeps its previous
     partitions up to its target, and only the partitions over a target, and unowned ones, move.
     The number moved is the fewest any assignment balanced this way can move, or one more
     (tests/test_assignors_properties.py checks it against an exact min-cost flow).
Kafka's UniformAssignor balances members' totals only (heterogeneous: as well as it can), so one
member may hold a whole topic while another holds none of it; corral keeps each topic spread too.
The result depends on the input's order only where choices tie (member order, then topic order).

`range` is Kafka's RangeAssignor exactly (4.x, stateless): members sorted (static members by
instance id first, then dynamic ones by member id, as Java compares strings), then each topic cut
into contiguous ranges, the first `partitions % subscribers` members taking one more.
"""

cimport cython
from cpython.ref cimport PyObject, Py_DECREF
from libc.stdlib cimport malloc, calloc, free, qsort
from libc.string cimport memset, memcmp, memcpy
from libc.stdint cimport uintptr_t, int64_t

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


# ---------------------------------------------------------------------------------------------
# Small helpers: checked allocation, an identity map from topic id objects to topic indices.

# Large arrays come from a small pool of blocks kept between calls: first touches of fresh
# memory (page faults) cost more here than the assignment itself (measured: a 2 MB array took
# 9 ms to fill when new, 0.7 ms when reused). The GIL guards the pool: alloc and release run with
# it held. Blocks carry their capacity in a header.
cdef enum:
    POOL_MIN_BYTES = 65536          # smaller blocks: plain calloc and free
    POOL_SLOTS = 16
    POOL_MAX_BYTES = 256 * 1024 * 1024
    HEADER = 16                     # the capacity, keeping the payload 16-byte aligned
cdef char* pool_blocks[POOL_SLOTS]
cdef size_t pool_bytes = 0
cdef int pool_count = 0


cdef void* alloc(size_t count, size_t size) except NULL:
    """Zeroed memory, or MemoryError (needs the GIL). Give it back with release()."""
    cdef size_t wanted = (count if count > 0 else 1) * size + HEADER
    cdef size_t capacity
    cdef int i, best = -1
    cdef char* block = NULL
    global pool_count, pool_bytes
    if wanted >= POOL_MIN_BYTES:
        for i in range(pool_count):
            capacity = (<size_t*>pool_blocks[i])[0]
            if capacity >= wanted and (best < 0 or capacity < (<size_t*>pool_blocks[best])[0]):
                best = i
        if best >= 0:
            block = pool_blocks[best]
            pool_count -= 1
            pool_blocks[best] = pool_blocks[pool_count]
            pool_bytes -= (<size_t*>block)[0]
            memset(block + HEADER, 0, wanted - HEADER)
            return block + HEADER
    block = <char*>calloc(wanted, 1)
    if block == NULL:
        raise MemoryError()
    (<size_t*>block)[0] = wanted
    return block + HEADER


cdef void release(void* p) noexcept:
    """Frees what alloc() gave (NULL is fine), keeping large blocks for the next call."""
    cdef char* block
    cdef size_t capacity
    cdef int i, smallest = 0
    global pool_count, pool_bytes
    if p == NULL:
        return
    block = <char*>p - HEADER
    capacity = (<size_t*>block)[0]
    if capacity >= POOL_MIN_BYTES and capacity <= POOL_MAX_BYTES:
        if pool_count == POOL_SLOTS:  # make room: drop the smallest kept block if smaller
            for i in range(1, pool_count):
                if (<size_t*>pool_blocks[i])[0] < (<size_t*>pool_blocks[smallest])[0]:
                    smallest = i
            if (<size_t*>pool_blocks[smallest])[0] >= capacity:
                free(block)
                return
            pool_bytes -= (<size_t*>pool_blocks[smallest])[0]
            free(pool_blocks[smallest])
            pool_count -= 1
            pool_blocks[smallest] = pool_blocks[pool_count]
        while pool_count > 0 and pool_bytes + capacity > POOL_MAX_BYTES:
            pool_count -= 1
            pool_bytes -= (<size_t*>pool_blocks[pool_count])[0]
            free(pool_blocks[pool_count])
        pool_blocks[pool_count] = block
        pool_count += 1
        pool_bytes += capacity
        return
    free(block)


cdef struct IdentityMap:
    # Open addressing on object addresses. The topic ids in members' assignments are usually the
    # very objects of the subscriptions, so most lookups never hash a topic id (a uuid.UUID hashes
    # in Python, slowly); an unknown object is looked up by value once, then remembered (also
    # when unknown: -1). Valid for one call, while the input keeps every object alive.
    size_t mask
    size_t used
    uintptr_t* keys
    int* values


cdef inline size_t slot_of(uintptr_t key, size_t mask) noexcept nogil:
    return <size_t>(((key >> 4) * <uintptr_t>0x9E3779B97F4A7C15) >> 17) & mask


cdef int identity_map_init(IdentityMap* m, size_t expected) except -1:
    cdef size_t size = 16
    while size < expected * 2:
        size <<= 1
    m.mask = size - 1
    m.used = 0
    m.keys = <uintptr_t*>alloc(size, sizeof(uintptr_t))
    m.values = <int*>alloc(size, sizeof(int))
    return 0


cdef void identity_map_free(IdentityMap* m) noexcept:
    release(m.keys)
    release(m.values)
    m.keys = NULL
    m.values = NULL


cdef int identity_map_put(IdentityMap* m, uintptr_t key, int value) except -1:
    cdef size_t i, size
    cdef uintptr_t* old_keys
    cdef int* old_values
    if (m.used + 1) * 2 > m.mask + 1:
        old_keys, old_values, size = m.keys, m.values, m.mask + 1
        m.keys = <uintptr_t*>alloc(size * 2, sizeof(uintptr_t))
        m.values = <int*>alloc(size * 2, sizeof(int))
        m.mask = size * 2 - 1
        m.used = 0
        for i in range(size):
            if old_keys[i] != 0:
                identity_map_put(m, old_keys[i], old_values[i])
        release(old_keys)
        release(old_values)
    i = slot_of(key, m.mask)
    while m.keys[i] != 0 and m.keys[i] != key:
        i = (i + 1) & m.mask
    if m.keys[i] == 0:
        m.used += 1
    m.keys[i] = key
    m.values[i] = value
    return 0


cdef int topic_index(IdentityMap* m, PyObject* topic, dict by_value) except -2:
    """The index of a topic id object, or -1 when the group does not subscribe to that topic."""
    cdef uintptr_t key = <uintptr_t>topic
    cdef size_t i = slot_of(key, m.mask)
    while m.keys[i] != 0:
        if m.keys[i] == key:
            return m.values[i]
        i = (i + 1) & m.mask
    found = by_value.get(<object>topic)
    cdef int index = -1 if found is None else <int>found
    identity_map_put(m, key, index)
    return index


# One-partition tuples are shared: with per-topic balance most members hold single partitions of
# many topics (a tuple is immutable, so sharing is safe). Up to this many partitions.
cdef enum:
    SINGLETONS_MAX = 65536
cdef list singletons = []


cdef object partitions_tuple(const int* partitions, Py_ssize_t count):
    """A tuple of Python ints, not tracked by the garbage collector: it holds ints only, so it
    is in no cycle, and a big result would otherwise make the collector walk it (a third of
    the time went there). Dicts of such tuples stay untracked too."""
    cdef int p
    if count == 1 and partitions[0] < SINGLETONS_MAX:
        while len(singletons) <= partitions[0]:
            p = len(singletons)
            singletons.append(partitions_tuple_new(&p, 1))
        return singletons[partitions[0]]
    return partitions_tuple_new(partitions, count)


cdef object partitions_tuple_new(const int* partitions, Py_ssize_t count):
    cdef PyObject* t = PyTuple_New(count)
    cdef PyObject* item
    cdef Py_ssize_t i
    if t == NULL:
        raise MemoryError()
    result = <object>t  # takes a second reference, released just below
    Py_DECREF(result)
    for i in range(count):
        item = PyLong_FromLong(partitions[i])
        if item == NULL:
            raise MemoryError()
        PyTuple_SetItem(t, i, item)
    PyObject_GC_UnTrack(t)
    return result


# ---------------------------------------------------------------------------------------------
# The result type: compact, read-only mappings over one table per computation.

cdef class _IntArray:
    cdef int* data

    def __cinit__(self, Py_ssize_t n):
        self.data = <int*>alloc(n, sizeof(int))

    def __dealloc__(self):
        release(self.data)


cdef class _ReadOnlyMapping:
    """What TargetAssignment and MemberAssignment share: != from ==, unhashable, shown and
    pickled as the dict they stand for."""

    cpdef dict materialized(self):
        raise NotImplementedError

    def __ne__(self, other):
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    __hash__ = None

    def __repr__(self):
        return f"{type(self).__name__}({self.materialized()!r})"

    def __reduce__(self):
        return (dict, (self.materialized(),))


# Neither result class can be part of a reference cycle (a member refers to its target, nothing
# refers back), so the garbage collector need not track them: results of big groups would
# otherwise make collections walk thousands of objects, and a cycle would keep the arrays alive
# until one ran.
@cython.no_gc
cdef class TargetAssignment(_ReadOnlyMapping):
    """A computed assignment: a read-only Mapping of member id -> MemberAssignment (registered as
    a collections.abc.Mapping), over flat arrays. Per partition, its owner (topic-major, as the
    computation left it); per member, its (topic, partition) pairs, sorted. Member objects are
    made when asked for (a new one each time), so a result over a big group costs no Python
    object per member or partition until someone reads it; given back as the members' previous assignments, it is
    read from the arrays."""
    cdef list member_ids
    cdef list topics             # topic id objects, by topic index
    cdef int n_members
    cdef int n_topics
    cdef int* topic_partitions   # n_topics
    cdef int64_t* topic_offset   # n_topics + 1: topic t's partitions in `owner`
    cdef int* owner              # member index per partition, -1 unassigned
    cdef int* member_offset      # n_members + 1: member m's pairs
    cdef int* member_topic_count # how many topics each member has partitions of
    cdef int* pair_topic
    cdef int* pair_partition
    cdef dict index_of           # member id -> index, built on first lookup

    def __dealloc__(self):
        release(self.topic_partitions)
        release(self.topic_offset)
        release(self.owner)
        release(self.member_offset)
        release(self.member_topic_count)
        release(self.pair_topic)
        release(self.pair_partition)

    cdef int ensure_pairs(self) except -1:
        """Each member's (topic, partition) pairs, from `owner`: made when first needed (reading
        a member), not by the assignment itself."""
        cdef int m, t, i
        cdef int64_t base
        cdef int* fill
        if self.member_offset != NULL:
            return 0
        fill = <int*>alloc(self.n_members, sizeof(int))
        try:
            self.member_offset = <int*>alloc(self.n_members + 1, sizeof(int))
            self.member_topic_count = <int*>alloc(self.n_members, sizeof(int))
            with nogil:
                for t in range(self.n_topics):
                    base = self.topic_offset[t]
                    for i in range(self.topic_partitions[t]):
                        m = self.owner[base + i]
                        if m >= 0:
                            self.member_offset[m + 1] += 1
                            if fill[m] != t + 1:  # m's first partition of t
                                fill[m] = t + 1
                                self.member_topic_count[m] += 1
                for m in range(self.n_members):
                    self.member_offset[m + 1] += self.member_offset[m]
                    fill[m] = 0
            self.pair_topic = <int*>alloc(self.member_offset[self.n_members], sizeof(int))
            self.pair_partition = <int*>alloc(self.member_offset[self.n_members], sizeof(int))
            with nogil:
                for t in range(self.n_topics):  # topic order, partitions ascending
                    base = self.topic_offset[t]
                    for i in range(self.topic_partitions[t]):
                        m = self.owner[base + i]
                        if m >= 0:
                            self.pair_topic[self.member_offset[m] + fill[m]] = t
                            self.pair_partition[self.member_offset[m] + fill[m]] = i
                            fill[m] += 1
        finally:
            release(fill)
        return 0

    cdef MemberAssignment member(self, int m):
        cdef MemberAssignment assignment
        self.ensure_pairs()
        assignment = MemberAssignment.__new__(MemberAssignment)
        assignment.target = self
        assignment.index = m
        assignment.start = self.member_offset[m]
        assignment.end = self.member_offset[m + 1]
        assignment.n_topics = self.member_topic_count[m]
        return assignment

    cdef int index(self, member_id) except -2:
        cdef int m
        if self.index_of is None:
            self.index_of = {}
            for m in range(self.n_members):
                self.index_of[self.member_ids[m]] = m
        return self.index_of.get(member_id, -1)

    def __len__(self):
        return self.n_members

    def __iter__(self):
        return iter(self.member_ids)

    def __getitem__(self, member_id):
        cdef int m = self.index(member_id)
        if m < 0:
            raise KeyError(member_id)
        return self.member(m)

    def __contains__(self, member_id):
        return self.index(member_id) >= 0

    def get(self, member_id, default=None):
        cdef int m = self.index(member_id)
        return default if m < 0 else self.member(m)

    def keys(self):
        return dict.fromkeys(self.member_ids).keys()

    def values(self):
        return [self.member(m) for m in range(self.n_members)]

    def items(self):
        return [(self.member_ids[m], self.member(m)) for m in range(self.n_members)]

    def __eq__(self, other):
        if other is self:
            return True
        if isinstance(other, _Mapping):
            return len(other) == self.n_members and all(
                member_id in other and self.member(m) == other[member_id]
                for m, member_id in enumerate(self.member_ids))
        return NotImplemented

    cpdef dict materialized(self):
        """member id -> {topic id -> partitions}, as plain dicts."""
        return {member_id: self.member(m).as_dict() for m, member_id in enumerate(self.member_ids)}


@cython.no_gc
cdef class MemberAssignment(_ReadOnlyMapping):
    """One member's partitions: a read-only Mapping of topic id -> ascending tuple of partitions
    (registered as a collections.abc.Mapping), part of a TargetAssignment. Compares equal to the
    dict with the same items; `dict(assignment)` materializes it."""
    cdef TargetAssignment target
    cdef int index               # the member's index in target
    cdef int start, end          # its pairs in target
    cdef int n_topics
    cdef dict cached             # the materialized dict, once something needed it

    cdef dict as_dict(self):
        cdef int i, first
        cdef dict d
        if self.cached is None:
            d = {}
            i = self.start
            while i < self.end:
                first = i
                while i < self.end and self.target.pair_topic[i] == self.target.pair_topic[first]:
                    i += 1
                d[self.target.topics[self.target.pair_topic[first]]] = partitions_tuple(
                    self.target.pair_partition + first, i - first)
            self.cached = d
        return self.cached

    def __len__(self):
        return self.n_topics

    def __getitem__(self, topic):
        return self.as_dict()[topic]

    def __contains__(self, topic):
        return topic in self.as_dict()

    def __iter__(self):
        return iter(self.as_dict())

    def keys(self):
        return self.as_dict().keys()

    def values(self):
        return self.as_dict().values()

    def items(self):
        return self.as_dict().items()

    def get(self, topic, default=None):
        return self.as_dict().get(topic, default)

    @property
    def partition_count(self):
        """How many partitions, over all topics (without materializing anything)."""
        return self.end - self.start

    def __eq__(self, other):
        cdef MemberAssignment that
        if type(other) is MemberAssignment:
            that = <MemberAssignment>other
            if that.target is self.target and that.index == self.index:
                return True
            if that.end - that.start != self.end - self.start or that.n_topics != self.n_topics:
                return False
            return self.as_dict() == that.as_dict()
        if isinstance(other, _Mapping):
            return self.as_dict() == dict(other.items())
        return NotImplemented

    cpdef dict materialized(self):
        """{topic id -> partitions} as a plain dict (the same one on every call: do not change it)."""
        return self.as_dict()


from collections.abc import Mapping as _Mapping
_Mapping.register(MemberAssignment)
_Mapping.register(TargetAssignment)


# ---------------------------------------------------------------------------------------------
# The group, flattened. Members are 0..n_members-1 in input order, topics 0..n_topics-1 in the
# order the subscriptions list them, and each topic's partitions are one slice of the partition
# arrays: [topic_offset[t], topic_offset[t + 1]).

cdef struct Group:
    int n_members
    int n_topics
    int n_classes
    int64_t n_partitions

    int* topic_partitions        # partition count of each topic
    int64_t* topic_offset        # n_topics + 1
    int* topic_subscribers       # members subscribed to each topic
    int* quota                   # partitions // subscribers: what every subscriber gets
    int* topic_extras            # partitions % subscribers: how many subscribers get one more

    int* member_class            # members with identical subscriptions share a class
    int* class_offset            # n_classes + 1; CSR of class_members
    int* class_members           # the members of each class, in member order
    int* class_topic_offset      # n_classes + 1; CSR of class_topics
    int* class_topics            # the topics each class subscribes to
    int* class_topic_slot        # parallel to class_topics: the (topic, class) slot below
    int* topic_class_offset      # n_topics + 1; CSR of topic_classes / topic_class_extras
    int* topic_classes           # the classes subscribed to each topic
    int* topic_class_extras      # how many of the topic's extras each of those classes gets
    unsigned char* subscribes    # bitmap class x topic (several classes only), or NULL

    int* previous_owner          # per partition: member index in the previous assignment, or -1
    int* owner                   # per partition: member index in the new assignment

    # Sticky candidates: per topic, the members that held more than its quota (CSR).
    int* candidate_offset        # n_topics + 1
    int* candidates
    char* candidate_used         # parallel to candidates: that member got the topic's extra
    int* member_candidates       # per member: how many topics it is a candidate of

    # The extras each member ends up with. Those kept by the sticky pass are only flagged in
    # candidate_used (topic-major, as move_partitions reads them); the others are listed per
    # member (capacity k + 1, CSR). Steps that need each member's full list first call
    # complete_lists, which lists the sticky ones too (the usual incremental assignment never
    # needs to: moving 500,000 flags into member lists and back took half its time).
    int* member_extra_offset     # n_members + 1
    int* member_extra_topics
    int* member_list_count       # entries in each member's list
    int* member_extra_count      # extras of each member, listed or not
    bint lists_complete
    int* class_base_extras       # k: every member of the class gets k or k + 1 extras
    int* class_top_slots         # how many members of the class get k + 1
    int* class_at_top            # how many already have k + 1

    # Scratch, per member / per topic / per class.
    int* member_scratch
    int* member_stamp
    int* topic_stamp
    int* class_scratch
    int* member_list             # n_members
    int* partition_list          # the largest topic's partition count


cdef void free_group(Group* g) noexcept:
    release(g.topic_partitions); release(g.topic_offset); release(g.topic_subscribers); release(g.quota)
    release(g.topic_extras); release(g.member_class); release(g.class_offset); release(g.class_members)
    release(g.class_topic_offset); release(g.class_topics); release(g.topic_class_offset)
    release(g.topic_classes); release(g.topic_class_extras); release(g.previous_owner); release(g.owner)
    release(g.candidate_offset); release(g.candidates); release(g.member_extra_offset)
    release(g.member_extra_topics); release(g.member_extra_count); release(g.class_base_extras)
    release(g.member_list_count)
    release(g.class_top_slots); release(g.class_at_top); release(g.member_scratch); release(g.member_stamp)
    release(g.topic_stamp); release(g.class_scratch); release(g.member_list)
    release(g.candidate_used); release(g.member_candidates)
    release(g.partition_list); release(g.class_topic_slot); release(g.subscribes)
    memset(g, 0, sizeof(Group))


# ---------------------------------------------------------------------------------------------
# Reading the group (with the GIL).

cdef class _Reader:
    """Python-side state while a group is read: member ids and specs, topic objects, the
    distinct subscriptions (one per class)."""
    cdef list member_ids
    cdef list specs
    cdef list topics             # topic id objects, by topic index
    cdef dict topic_by_value_    # topic id -> index (see by_value)
    cdef list class_subscriptions


cdef dict by_value(_Reader r):
    """topic id -> index; made when first needed (a lookup by value: most are by identity)."""
    cdef int t
    if r.topic_by_value_ is None:
        r.topic_by_value_ = {}
        for t in range(len(r.topics)):
            r.topic_by_value_[r.topics[t]] = t
    return r.topic_by_value_


cdef _Reader read_members(Group* g, members, bint homogeneous, partition_counts):
    cdef _Reader r = _Reader()
    cdef int m, c, t, n, i, total, slot
    cdef int64_t bits
    cdef dict class_by_identity, class_by_value
    cdef object last_subscription = None
    cdef int last_class = -1
    r.member_ids = []
    r.specs = []
    for member_id, spec in members.items():
        r.member_ids.append(member_id)
        r.specs.append(spec)
    g.n_members = len(r.member_ids)
    g.member_class = <int*>alloc(g.n_members, sizeof(int))

    # Subscription classes. HOMOGENEOUS is taken at its word, as Kafka does: everyone has the
    # first member's subscription. Otherwise a class per distinct subscription, found by object
    # identity first (members usually share the set object) and by value when that fails.
    r.class_subscriptions = []
    if homogeneous:
        subscription = r.specs[0].subscribed_topic_ids
        if not isinstance(subscription, (set, frozenset)):  # a list may repeat a topic
            subscription = frozenset(subscription)
        r.class_subscriptions.append(subscription)
    else:
        class_by_identity = {}
        class_by_value = {}
        for m in range(g.n_members):
            subscription = r.specs[m].subscribed_topic_ids
            if subscription is last_subscription:
                g.member_class[m] = last_class
                continue
            found = class_by_identity.get(id(subscription))
            if found is None:
                key = subscription if isinstance(subscription, frozenset) else frozenset(subscription)
                found = class_by_value.get(key)
                if found is None:
                    found = len(r.class_subscriptions)
                    class_by_value[key] = found
                    r.class_subscriptions.append(key)
                class_by_identity[id(subscription)] = found
            g.member_class[m] = <int>found
            last_subscription, last_class = subscription, <int>found
    g.n_classes = len(r.class_subscriptions)

    # Topics, in the order the subscriptions list them; Kafka fails the assignment when a member
    # subscribes to a topic the metadata does not know (PartitionAssignorException).
    r.topics = []
    counts = []
    class_topic_lists = []
    if g.n_classes == 1:  # a set has no duplicates: every topic is new
        for topic in r.class_subscriptions[0]:
            count = partition_counts.get(topic)
            if count is None or count < 0:
                raise LookupError(topic)
            r.topics.append(topic)
            counts.append(count)
        class_topic_lists.append(range(len(r.topics)))
    else:
        r.topic_by_value_ = {}
        for subscription in r.class_subscriptions:
            indices = []
            for topic in subscription:
                found = r.topic_by_value_.get(topic)
                if found is None:
                    count = partition_counts.get(topic)
                    if count is None or count < 0:
                        raise LookupError(topic)
                    found = len(r.topics)
                    r.topic_by_value_[topic] = found
                    r.topics.append(topic)
                    counts.append(count)
                indices.append(found)
            class_topic_lists.append(indices)
    g.n_topics = len(r.topics)

    g.topic_partitions = <int*>alloc(g.n_topics, sizeof(int))
    g.topic_offset = <int64_t*>alloc(g.n_topics + 1, sizeof(int64_t))
    for t in range(g.n_topics):
        n = counts[t]
        g.topic_partitions[t] = n
        g.topic_offset[t + 1] = g.topic_offset[t] + n
    g.n_partitions = g.topic_offset[g.n_topics]

    # Classes: members (CSR) and topics (CSR); topics: their classes (CSR).
    g.class_offset = <int*>alloc(g.n_classes + 1, sizeof(int))
    g.class_members = <int*>alloc(g.n_members, sizeof(int))
    for m in range(g.n_members):
        g.class_offset[g.member_class[m] + 1] += 1
    for c in range(g.n_classes):
        g.class_offset[c + 1] += g.class_offset[c]
    g.class_scratch = <int*>alloc(g.n_classes, sizeof(int))
    for m in range(g.n_members):
        c = g.member_class[m]
        g.class_members[g.class_offset[c] + g.class_scratch[c]] = m
        g.class_scratch[c] += 1

    total = 0
    for indices in class_topic_lists:
        total += len(indices)
    g.class_topic_offset = <int*>alloc(g.n_classes + 1, sizeof(int))
    g.class_topics = <int*>alloc(total, sizeof(int))
    g.topic_class_offset = <int*>alloc(g.n_topics + 1, sizeof(int))
    g.topic_classes = <int*>alloc(total, sizeof(int))
    g.topic_class_extras = <int*>alloc(total, sizeof(int))
    g.class_topic_slot = <int*>alloc(total, sizeof(int))
    g.topic_subscribers = <int*>alloc(g.n_topics, sizeof(int))
    for c in range(g.n_classes):
        indices = class_topic_lists[c]
        g.class_topic_offset[c + 1] = g.class_topic_offset[c] + len(indices)
        for i in range(len(indices)):
            t = indices[i]
            g.class_topics[g.class_topic_offset[c] + i] = t
            g.topic_class_offset[t + 1] += 1
            g.topic_subscribers[t] += g.class_offset[c + 1] - g.class_offset[c]
    for t in range(g.n_topics):
        g.topic_class_offset[t + 1] += g.topic_class_offset[t]
    g.topic_stamp = <int*>alloc(g.n_topics, sizeof(int))
    for c in range(g.n_classes):
        for i in range(g.class_topic_offset[c], g.class_topic_offset[c + 1]):
            t = g.class_topics[i]
            slot = g.topic_class_offset[t] + g.topic_stamp[t]
            g.topic_classes[slot] = c
            g.class_topic_slot[i] = slot
            g.topic_stamp[t] += 1
    memset(g.topic_stamp, 0, g.n_topics * sizeof(int))
    # Which class subscribes to which topic, for reading previous assignments: a bitmap unless
    # that would be large (then Python's `in` on the subscription).
    bits = <int64_t>g.n_classes * g.n_topics
    if g.n_classes > 1 and bits <= (<int64_t>1 << 30):
        g.subscribes = <unsigned char*>alloc(bits // 8 + 1, 1)
        for c in range(g.n_classes):
            for i in range(g.class_topic_offset[c], g.class_topic_offset[c + 1]):
                bits = <int64_t>c * g.n_topics + g.class_topics[i]
                g.subscribes[bits >> 3] |= 1 << (bits & 7)
    return r


cdef inline void take_previous(Group* g, int m, int t, int p) noexcept:
    """Partition p of topic t was member m's; ignored when out of range or when an earlier
    member already had it (an invalid previous assignment)."""
    cdef int64_t base = g.topic_offset[t]
    if 0 <= p < g.topic_partitions[t] and g.previous_owner[base + p] == -1:
        g.previous_owner[base + p] = m


cdef inline int member_subscribes(Group* g, int m, int t, object topic, object subscription) except -1:
    cdef int64_t bit
    if g.n_classes == 1:
        return True  # the topics are exactly the one class's
    if g.subscribes != NULL:
        bit = <int64_t>g.member_class[m] * g.n_topics + t
        return (g.subscribes[bit >> 3] >> (bit & 7)) & 1
    return topic in subscription


cdef int* topic_map_of(TargetAssignment target, IdentityMap* topics_by_identity, _Reader r,
                       dict maps) except NULL:
    """Topic index in `target` -> topic index in this group (or -1), once per target. Usually
    the same topic objects in the same order (the same subscription set): no lookups then."""
    cdef int i
    cdef int* mapping
    cdef bint same = target.n_topics == len(r.topics)
    holder = maps.get(id(target))
    if holder is not None:
        return (<_IntArray>holder).data
    holder = _IntArray(max(target.n_topics, 1))
    mapping = (<_IntArray>holder).data
    for i in range(target.n_topics if same else 0):
        if target.topics[i] is not r.topics[i]:
            same = False
            break
        mapping[i] = i
    for i in range(0 if same else target.n_topics):
        mapping[i] = topic_index(topics_by_identity, <PyObject*>target.topics[i], by_value(r))
    maps[id(target)] = holder
    return mapping


cdef TargetAssignment whole_previous_target(Group* g, _Reader r, int* old_to_new):
    """The TargetAssignment every member's previous assignment comes from, each member its own
    entry of it (members without one have empty assignments: new members), or None. The usual
    case: the coordinator gives back what the last computation returned."""
    cdef TargetAssignment target = None
    cdef MemberAssignment previous
    cdef int m, i
    for m in range(g.n_members):
        assignment = r.specs[m].assignment
        if type(assignment) is MemberAssignment:
            previous = <MemberAssignment>assignment
            if target is None:
                target = previous.target
                for i in range(target.n_members):
                    old_to_new[i] = -1
            if (previous.target is not target or old_to_new[previous.index] != -1
                    or target.member_ids[previous.index] != r.member_ids[m]):
                return None
            old_to_new[previous.index] = m
        elif assignment:
            return None
    return target


cdef int read_previous_assignment(Group* g, _Reader r) except -1:
    """previous_owner from each member's `assignment`. Partitions of topics the member no longer
    subscribes to, out of range, or already owned by an earlier member are dropped. A previous
    TargetAssignment is read from its arrays: all at once when it is the whole group's (one
    pass over its partitions), else member by member; any other mapping through Python."""
    cdef IdentityMap topics_by_identity
    cdef int m, t, old_t, i, j, p, o, n
    cdef int64_t base, old_base
    cdef Py_ssize_t k, size
    cdef MemberAssignment previous
    cdef TargetAssignment target
    cdef int* mapping
    cdef int* old_to_new = NULL
    cdef dict topic_maps = {}
    g.previous_owner = <int*>alloc(g.n_partitions, sizeof(int))
    for i in range(g.n_partitions):
        g.previous_owner[i] = -1
    identity_map_init(&topics_by_identity, g.n_topics)
    try:
        first = None
        for m in range(g.n_members):
            if type(r.specs[m].assignment) is MemberAssignment:
                first = r.specs[m].assignment
                break
        if first is not None:
            old_to_new = <int*>alloc((<MemberAssignment>first).target.n_members, sizeof(int))
            target = whole_previous_target(g, r, old_to_new)
            if target is not None:
                mapping = topic_map_of(target, &topics_by_identity, r, topic_maps)
                for old_t in range(target.n_topics):
                    t = mapping[old_t]
                    if t < 0:
                        continue
                    n = min(g.topic_partitions[t], target.topic_partitions[old_t])
                    base, old_base = g.topic_offset[t], target.topic_offset[old_t]
                    topic = target.topics[old_t]
                    for p in range(n):
                        o = target.owner[old_base + p]
                        if o >= 0:
                            m = old_to_new[o]
                            if m >= 0 and (g.n_classes == 1 or member_subscribes(
                                    g, m, t, topic, r.class_subscriptions[g.member_class[m]])):
                                g.previous_owner[base + p] = m
                return 0
        for m in range(g.n_members):
            assignment = r.specs[m].assignment
            subscription = r.class_subscriptions[g.member_class[m]]
            if type(assignment) is MemberAssignment:
                previous = <MemberAssignment>assignment
                target = previous.target
                target.ensure_pairs()
                mapping = topic_map_of(target, &topics_by_identity, r, topic_maps)
                j = previous.start
                while j < previous.end:
                    old_t = target.pair_topic[j]
                    t = mapping[old_t]
                    if t >= 0 and not member_subscribes(g, m, t, target.topics[old_t], subscription):
                        t = -1
                    while j < previous.end and target.pair_topic[j] == old_t:
                        if t >= 0:
                            take_previous(g, m, t, target.pair_partition[j])
                        j += 1
                continue
            if not assignment:
                continue
            for topic, partitions in assignment.items():
                t = topic_index(&topics_by_identity, <PyObject*>topic, by_value(r))
                if t < 0 or not member_subscribes(g, m, t, topic, subscription):
                    continue  # a topic it no longer gets
                if PyTuple_CheckExact(<PyObject*>partitions):
                    size = PyTuple_Size(<PyObject*>partitions)
                    for k in range(size):
                        take_previous(g, m, t, PyLong_AsLong(PyTuple_GetItem(<PyObject*>partitions, k)))
                else:
                    for item in partitions:
                        take_previous(g, m, t, item)
    finally:
        identity_map_free(&topics_by_identity)
        release(old_to_new)
    return 0


# ---------------------------------------------------------------------------------------------
# uniform, step by step (no GIL).

cdef int compute_quotas_and_candidates(Group* g) noexcept nogil:
    """Quota and extras per topic; and the sticky candidates: per topic, the members that held
    more than its quota before (each keeps quota + 1 if it gets one of the topic's extras)."""
    cdef int t, p, o, i, touched, n_candidates = 0
    cdef int64_t base
    cdef int* held = g.member_scratch
    cdef int* touched_members = g.member_list
    for t in range(g.n_topics):
        g.quota[t] = g.topic_partitions[t] // g.topic_subscribers[t]
        g.topic_extras[t] = g.topic_partitions[t] % g.topic_subscribers[t]
        base = g.topic_offset[t]
        touched = 0
        for p in range(g.topic_partitions[t]):
            o = g.previous_owner[base + p]
            if o >= 0:
                if held[o] == 0:
                    touched_members[touched] = o
                    touched += 1
                held[o] += 1
        for i in range(touched):
            o = touched_members[i]
            if held[o] > g.quota[t] and g.topic_extras[t] > 0:
                g.candidates[n_candidates] = o
                g.member_candidates[o] += 1
                n_candidates += 1
            held[o] = 0
        g.candidate_offset[t + 1] = n_candidates
    return 0


cdef inline bint lighter(Group* g, int c, int d, int64_t* load) noexcept nogil:
    """Whether class c's average load (partitions per member, so far) is below class d's."""
    cdef int64_t size_c = g.class_offset[c + 1] - g.class_offset[c]
    cdef int64_t size_d = g.class_offset[d + 1] - g.class_offset[d]
    return load[c] * size_d < load[d] * size_c


cdef inline bint before(Group* g, int c, int d, int64_t* load) noexcept nogil:
    """Heap order: the lighter class, the lower index on a tie (deterministic)."""
    return lighter(g, c, d, load) or (not lighter(g, d, c, load) and c < d)


cdef void heap_push(Group* g, int* heap, int n, int c, int64_t* load) noexcept nogil:
    cdef int i = n, parent
    heap[i] = c
    while i > 0:
        parent = (i - 1) // 2
        if not before(g, heap[i], heap[parent], load):
            break
        heap[i], heap[parent] = heap[parent], heap[i]
        i = parent


cdef void heap_down(Group* g, int* heap, int n, int i, int64_t* load) noexcept nogil:
    cdef int smallest, child
    while True:
        smallest = i
        for child in range(2 * i + 1, min(2 * i + 3, n)):
            if before(g, heap[child], heap[smallest], load):
                smallest = child
        if smallest == i:
            return
        heap[i], heap[smallest] = heap[smallest], heap[i]
        i = smallest


cdef int share_extras_between_classes(Group* g, int64_t* load, int* given, int* heap) noexcept nogil:
    """How many of each topic's extras each subscribed class gets. With one class (a homogeneous
    group, or a topic only one kind of member wants) it gets them all. Otherwise each class first
    gets one per sticky candidate it has, then the rest go one at a time to the class with the
    lowest average load (`load`: partitions per class so far, quotas included). `heap`: room
    for every class."""
    cdef int t, c, i, n, best, remaining, lo, hi
    for c in range(g.n_classes):
        for i in range(g.class_topic_offset[c], g.class_topic_offset[c + 1]):
            load[c] += <int64_t>g.quota[g.class_topics[i]] * (g.class_offset[c + 1] - g.class_offset[c])
    for t in range(g.n_topics):
        lo, hi = g.topic_class_offset[t], g.topic_class_offset[t + 1]
        if hi - lo == 1:
            g.topic_class_extras[lo] = g.topic_extras[t]
            load[g.topic_classes[lo]] += g.topic_extras[t]
            continue
        remaining = g.topic_extras[t]
        for i in range(lo, hi):
            given[g.topic_classes[i]] = 0
        for i in range(g.candidate_offset[t], g.candidate_offset[t + 1]):
            if remaining == 0:
                break
            c = g.member_class[g.candidates[i]]
            if given[c] < g.class_offset[c + 1] - g.class_offset[c]:
                given[c] += 1
                load[c] += 1
                remaining -= 1
        # The lightest class first, from a binary heap of the classes with room (many classes
        # can share a topic: one per member when every subscription differs).
        n = 0
        for i in range(lo, hi):
            c = g.topic_classes[i]
            if given[c] < g.class_offset[c + 1] - g.class_offset[c]:
                heap_push(g, heap, n, c, load)
                n += 1
        while remaining > 0:
            best = heap[0]
            given[best] += 1
            load[best] += 1
            remaining -= 1
            n -= 1
            heap[0] = heap[n]
            heap_down(g, heap, n, 0, load)
            if given[best] < g.class_offset[best + 1] - g.class_offset[best]:
                heap_push(g, heap, n, best, load)
                n += 1
        for i in range(lo, hi):
            g.topic_class_extras[i] = given[g.topic_classes[i]]
    return 0


cdef inline void count_extra(Group* g, int m) noexcept nogil:
    cdef int c = g.member_class[m]
    g.member_extra_count[m] += 1
    if g.member_extra_count[m] == g.class_base_extras[c] + 1:
        g.class_at_top[c] += 1


cdef inline void give_extra(Group* g, int m, int t) noexcept nogil:
    """Member m gets topic t's extra, listed."""
    g.member_extra_topics[g.member_extra_offset[m] + g.member_list_count[m]] = t
    g.member_list_count[m] += 1
    count_extra(g, m)


cdef inline bint has_extra(Group* g, int m, int t) noexcept nogil:
    """Whether m holds t's extra (lists complete)."""
    cdef int i
    for i in range(g.member_extra_offset[m], g.member_extra_offset[m] + g.member_list_count[m]):
        if g.member_extra_topics[i] == t:
            return True
    return False


cdef inline bint holds_sticky_extra(Group* g, int m, int t) noexcept nogil:
    """Whether the sticky pass gave m topic t's extra (a scan of t's candidates)."""
    cdef int i
    for i in range(g.candidate_offset[t], g.candidate_offset[t + 1]):
        if g.candidates[i] == m:
            return g.candidate_used[i]
    return False


cdef void complete_lists(Group* g) noexcept nogil:
    """Lists the extras the sticky pass only flagged, so every member's list is whole."""
    cdef int t, i, m
    if g.lists_complete:
        return
    for t in range(g.n_topics):
        for i in range(g.candidate_offset[t], g.candidate_offset[t + 1]):
            if g.candidate_used[i]:
                m = g.candidates[i]
                g.member_extra_topics[g.member_extra_offset[m] + g.member_list_count[m]] = t
                g.member_list_count[m] += 1
    g.lists_complete = True


cdef int plan_class_sizes(Group* g) noexcept nogil:
    """k and the number of k + 1 members per class; the capacity of each member's extras list."""
    cdef int c, i, m, size
    cdef int64_t extras
    for c in range(g.n_classes):
        extras = 0
        for i in range(g.class_topic_offset[c], g.class_topic_offset[c + 1]):
            extras += g.topic_class_extras[g.class_topic_slot[i]]
        size = g.class_offset[c + 1] - g.class_offset[c]
        g.class_base_extras[c] = <int>(extras // size)
        g.class_top_slots[c] = <int>(extras % size)
    for m in range(g.n_members):
        g.member_extra_offset[m + 1] = g.member_extra_offset[m] + g.class_base_extras[g.member_class[m]] + 1
    return 0


cdef void keep_sticky_extras(Group* g, int* left, int* waiting, int* waiting_offset) noexcept nogil:
    """First, extras go to the members that already hold quota + 1 of the topic, as long as their
    class's totals stay balanced: up to k extras each, then k + 1 for class_top_slots members.
    The k + 1 slots are handed out round-robin over the topics, so that the candidacies left
    over (members staying at k) are spread over the topics: a joining member must take its
    extras from them, at most one per topic. `left`: per (topic, class) slot, extras not given
    yet; `waiting` (as many as candidates) and `waiting_offset` (n_topics + 1): scratch."""
    cdef int t, i, j, m, c, slot, n, round_, rounds = 0
    cdef int n_active = 0, used_active, kept_active
    cdef int* active = g.topic_stamp
    cdef int* slot_of_class = g.class_scratch
    for t in range(g.n_topics):
        for i in range(g.topic_class_offset[t], g.topic_class_offset[t + 1]):
            slot_of_class[g.topic_classes[i]] = i
        waiting_offset[t + 1] = waiting_offset[t]
        for i in range(g.candidate_offset[t], g.candidate_offset[t + 1]):
            m = g.candidates[i]
            slot = slot_of_class[g.member_class[m]]
            if left[slot] == 0:
                continue
            if g.member_extra_count[m] < g.class_base_extras[g.member_class[m]]:
                take_sticky(g, i, left, slot)
            else:  # at k: may get one of the k + 1 slots below
                waiting[waiting_offset[t + 1]] = i
                waiting_offset[t + 1] += 1
        n = waiting_offset[t + 1] - waiting_offset[t]
        if n > rounds:
            rounds = n
    # Round r takes the r-th waiting candidacy of every topic that has one; `active` lists those
    # topics (in the topic scratch, zeroed again at the end), dropping topics as they run out.
    for t in range(g.n_topics):
        if waiting_offset[t + 1] > waiting_offset[t]:
            active[n_active] = t
            n_active += 1
    used_active = n_active
    for round_ in range(rounds):
        kept_active = 0
        for j in range(n_active):
            t = active[j]
            if waiting_offset[t] + round_ >= waiting_offset[t + 1]:
                continue
            active[kept_active] = t
            kept_active += 1
            i = waiting[waiting_offset[t] + round_]
            m = g.candidates[i]
            c = g.member_class[m]
            slot = g.topic_class_offset[t]
            while g.topic_classes[slot] != c:
                slot += 1
            if (left[slot] > 0 and g.member_extra_count[m] == g.class_base_extras[c]
                    and g.class_at_top[c] < g.class_top_slots[c]):
                take_sticky(g, i, left, slot)
        n_active = kept_active
    for j in range(used_active):
        active[j] = 0


cdef inline void take_sticky(Group* g, int i, int* left, int slot) noexcept nogil:
    count_extra(g, g.candidates[i])  # flagged, not listed (see Group.member_extra_topics)
    g.candidate_used[i] = 1
    left[slot] -= 1


cdef inline void take_extra(Group* g, int m, int t) noexcept nogil:
    """Member m gives topic t's extra up (lists complete)."""
    cdef int c = g.member_class[m]
    cdef int i, last = g.member_extra_offset[m] + g.member_list_count[m] - 1
    for i in range(g.member_extra_offset[m], last + 1):
        if g.member_extra_topics[i] == t:
            g.member_extra_topics[i] = g.member_extra_topics[last]
            break
    if g.member_extra_count[m] == g.class_base_extras[c] + 1:
        g.class_at_top[c] -= 1
    g.member_list_count[m] -= 1
    g.member_extra_count[m] -= 1


cdef inline void set_candidate_used(Group* g, int t, int m, char used) noexcept nogil:
    cdef int i
    for i in range(g.candidate_offset[t], g.candidate_offset[t + 1]):
        if g.candidates[i] == m:
            g.candidate_used[i] = used
            return


cdef bint improve_sticky_extras(Group* g, int c, int* left_of, int* seen, int* stamp,
                                int* parent, int* queue, int* path) noexcept nogil:
    """The greedy pass above can strand a candidate: member a took topic x's extra, then b,
    the only other candidate of x, could not take y's... Augmenting paths fix that, as in a
    bipartite matching: a path starts at a topic with extras left, goes to a candidate of it
    that does not hold its extra, and either ends at a member with room for one more extra or
    continues through a topic that member gives up (to another of that topic's candidates), or
    through the class's k + 1 slots (a member at k + 1 gives one up). Each path keeps one more
    partition in place; when none is left, the class keeps the most partitions balance allows.
    Nodes: topic t is t, member m is n_topics + m, the k + 1 slots are n_topics + n_members."""
    cdef int T = g.n_topics, M = g.n_members, top = g.n_topics + g.n_members
    cdef int k = g.class_base_extras[c], top_slots = g.class_top_slots[c]
    cdef int i, j, m, t, u, v, e, head, tail, found, length
    cdef bint improved = False
    # Cheap exits. A path starts at a topic with extras left and a candidate (of this class)
    # without its extra; it ends at a member with room that is a candidate somewhere it does not
    # hold the extra (a joining member, with no candidacies, never ends one). Before this step
    # the extras not listed are exactly the sticky ones.
    found = 0
    for i in range(g.class_topic_offset[c], g.class_topic_offset[c + 1]):
        t = g.class_topics[i]
        if left_of[t] > 0:
            for j in range(g.candidate_offset[t], g.candidate_offset[t + 1]):
                if not g.candidate_used[j] and g.member_class[g.candidates[j]] == c:
                    found = 1
                    break
            if found:
                break
    if not found:
        return False
    found = 0
    for j in range(g.class_offset[c], g.class_offset[c + 1]):
        m = g.class_members[j]
        e = g.member_extra_count[m]
        if (e < k or (e == k and g.class_at_top[c] < top_slots)) and (
                g.member_candidates[m] > e - g.member_list_count[m]):
            found = 1
            break
    if not found:
        return False
    complete_lists(g)
    while True:
        stamp[0] += 1
        head = tail = 0
        for i in range(g.class_topic_offset[c], g.class_topic_offset[c + 1]):
            t = g.class_topics[i]
            if left_of[t] > 0:
                seen[t] = stamp[0]
                parent[t] = -1
                queue[tail] = t
                tail += 1
        found = -1
        while head < tail and found < 0:
            u = queue[head]
            head += 1
            if u < T:  # a topic with an extra to give: to its candidates without it
                for i in range(g.candidate_offset[u], g.candidate_offset[u + 1]):
                    m = g.candidates[i]
                    if g.candidate_used[i] or g.member_class[m] != c or seen[T + m] == stamp[0]:
                        continue
                    v = T + m
                    seen[v] = stamp[0]
                    parent[v] = u
                    e = g.member_extra_count[m]
                    if e < k or (e == k and g.class_at_top[c] < top_slots):
                        found = v
                        break
                    queue[tail] = v
                    tail += 1
            elif u < top:  # a member taking one more: gives one of its extras up, or goes to k + 1
                m = u - T
                if g.member_extra_count[m] == k and top_slots > 0 and seen[top] != stamp[0]:
                    seen[top] = stamp[0]
                    parent[top] = u
                    queue[tail] = top
                    tail += 1
                for i in range(g.member_extra_offset[m], g.member_extra_offset[m] + g.member_list_count[m]):
                    t = g.member_extra_topics[i]
                    if seen[t] != stamp[0]:
                        seen[t] = stamp[0]
                        parent[t] = u
                        queue[tail] = t
                        tail += 1
            else:  # the k + 1 slots are full: a member at k + 1 goes back to k
                for j in range(g.class_offset[c], g.class_offset[c + 1]):
                    m = g.class_members[j]
                    if g.member_extra_count[m] == k + 1 and seen[T + m] != stamp[0]:
                        seen[T + m] = stamp[0]
                        parent[T + m] = u
                        queue[tail] = T + m
                        tail += 1
        if found < 0:
            return improved
        # The path from its end back to its source, applied in that order: a member on the way
        # gives its extra up before it takes the next one, so no list ever holds k + 2.
        length = 0
        v = found
        while v >= 0:
            path[length] = v
            length += 1
            v = parent[v]
        left_of[path[length - 1]] -= 1
        for i in range(1, length):
            u, v = path[i], path[i - 1]
            if u < T:  # member v takes topic u's extra
                give_extra(g, v - T, u)
                set_candidate_used(g, u, v - T, 1)
            elif u < top and v < T:  # member u gives topic v's extra up
                take_extra(g, u - T, v)
                set_candidate_used(g, v, u - T, 0)
        improved = True


cdef bint is_candidate(Group* g, int m, int t) noexcept nogil:
    """Whether member m held more than topic t's quota (its extra of t keeps a partition)."""
    cdef int i
    for i in range(g.candidate_offset[t], g.candidate_offset[t + 1]):
        if g.candidates[i] == m:
            return True
    return False


cdef void find_swap(Group* g, int x, int c, int* open_topics, int n_open, int* left_of,
                    int* best_o, int* best_t) noexcept nogil:
    """For swap_for_extra: the first swap that moves nothing more, else the first one found."""
    cdef int i, j, o, y, t, u, first, last, score, best_score = -2
    cdef int* mark = g.topic_stamp  # marks x's extras
    cdef bint candidates_only, keeps_t
    for candidates_only in (True, False):
        for i in range(n_open):
            t = open_topics[i]
            if left_of[t] == 0:
                continue
            if candidates_only:
                first, last = g.candidate_offset[t], g.candidate_offset[t + 1]
            else:
                first, last = g.class_offset[c], g.class_offset[c + 1]
            for j in range(first, last):
                y = g.candidates[j] if candidates_only else g.class_members[j]
                if y == x or g.member_class[y] != c or has_extra(g, y, t):
                    continue
                keeps_t = candidates_only or is_candidate(g, y, t)
                for o in range(g.member_extra_offset[y], g.member_extra_offset[y] + g.member_list_count[y]):
                    u = g.member_extra_topics[o]
                    if mark[u] == x + 1:
                        continue
                    # +1 if t's extra keeps a partition for y, -1 if u's did.
                    score = (1 if keeps_t else 0) - (1 if is_candidate(g, y, u) else 0)
                    if score > best_score:
                        best_score, best_o[0], best_t[0] = score, o, t
                        if score >= 0:
                            return


cdef bint swap_for_extra(Group* g, int x, int c, int* open_topics, int n_open, int* left_of) noexcept nogil:
    """Member x needs one more extra but holds one of every topic that has extras left. Find a
    member y of its class without topic t's extra (t still open) holding an extra u that x lacks:
    u goes to x, t's extra to y. Totals stay as they were except x's, which grows by one. The
    swap should move nothing more: best a y that t's extra keeps a partition for (it held more
    than t's quota), else a u that kept none for y; only failing both, any swap."""
    cdef int o = -1, t = -1, u, i
    if not g.lists_complete:  # swaps look at other members' whole lists
        complete_lists(g)
        for i in range(g.member_extra_offset[x], g.member_extra_offset[x] + g.member_list_count[x]):
            g.topic_stamp[g.member_extra_topics[i]] = x + 1
    find_swap(g, x, c, open_topics, n_open, left_of, &o, &t)
    if o < 0:
        return False
    u = g.member_extra_topics[o]
    g.member_extra_topics[o] = t
    left_of[t] -= 1
    give_extra(g, x, u)
    g.topic_stamp[u] = x + 1
    return True


cdef (int, int) compact_open_topics(int* open_topics, int n_open, int cursor, int* left_of) noexcept nogil:
    cdef int i, kept = 0, new_cursor = 0
    for i in range(n_open):
        if i == cursor:
            new_cursor = kept
        if left_of[open_topics[i]] > 0:
            open_topics[kept] = open_topics[i]
            kept += 1
    if new_cursor >= kept:
        new_cursor = 0
    return kept, new_cursor


cdef int compare_int64(const void* a, const void* b) noexcept nogil:
    cdef int64_t x = (<const int64_t*>a)[0], y = (<const int64_t*>b)[0]
    return (x > y) - (x < y)


cdef bint fill_class_extras(Group* g, int c, int* open_topics, int* left_of, int64_t* order) noexcept nogil:
    """Then the class's remaining extras: members below k take them, topic by topic in a
    rotating order (so the members share the topics out), never two of one topic; then
    class_top_slots members reach k + 1. False if that cannot be completed (rare)."""
    cdef int i, j, m, t, n, need, n_open = 0, cursor = 0, scanned, exhausted = 0
    cdef int64_t work, needing
    cdef bint mixed
    cdef int k = g.class_base_extras[c]
    cdef int* mark = g.topic_stamp
    cdef int phase
    for i in range(g.class_topic_offset[c], g.class_topic_offset[c + 1]):
        t = g.class_topics[i]
        if left_of[t] > 0:
            open_topics[n_open] = t
            n_open += 1
    if n_open == 0:
        return True
    if not g.lists_complete:
        # Checking a flagged extra scans the topic's candidates: fine for the few topics an
        # incremental assignment leaves open; past a budget, listing all flags is cheaper.
        work = 0
        for i in range(n_open):
            t = open_topics[i]
            work += g.candidate_offset[t + 1] - g.candidate_offset[t]
        needing = g.class_top_slots[c] - g.class_at_top[c]
        for j in range(g.class_offset[c], g.class_offset[c + 1]):
            if g.member_extra_count[g.class_members[j]] < k:
                needing += 1
        if work * needing > 16 * (<int64_t>g.candidate_offset[g.n_topics] + g.n_members):
            complete_lists(g)
    # Members that need the most choose first (a joining member needs k extras of k different
    # topics: left for last, it could find the extras left all of one topic).
    n = g.class_offset[c + 1] - g.class_offset[c]
    mixed = False
    for j in range(n):
        m = g.class_members[g.class_offset[c] + j]
        need = k - g.member_extra_count[m]
        if need < 0:
            need = 0
        order[j] = <int64_t>(-need) * (<int64_t>1 << 32) + j  # need descending, then class order
        mixed = mixed or (j > 0 and (order[j] >> 32) != (order[0] >> 32))
    if mixed:  # (when every member needs as many, class order is that order already)
        qsort(order, n, sizeof(int64_t), compare_int64)
    # Phase 0: members below k; 1: k + 1 for class_top_slots members, directly; 2: the same
    # through swaps, for what phase 1 could not place.
    for phase in range(3):
        for j in range(n):
            m = g.class_members[g.class_offset[c] + <int>(order[j] & <int64_t>0xFFFFFFFF)]
            if phase == 0:
                need = k - g.member_extra_count[m]
            else:
                need = 1 if (g.member_extra_count[m] == k and g.class_at_top[c] < g.class_top_slots[c]) else 0
            if need <= 0:
                continue
            for i in range(g.member_extra_offset[m], g.member_extra_offset[m] + g.member_list_count[m]):
                mark[g.member_extra_topics[i]] = m + 1
            scanned = 0
            while need > 0 and scanned < n_open and phase != 2:
                t = open_topics[cursor]
                cursor = cursor + 1 if cursor + 1 < n_open else 0
                scanned += 1
                if left_of[t] > 0 and mark[t] != m + 1 and not (
                        not g.lists_complete and holds_sticky_extra(g, m, t)):
                    give_extra(g, m, t)
                    mark[t] = m + 1
                    left_of[t] -= 1
                    need -= 1
                    scanned = 0
                    if left_of[t] == 0:
                        exhausted += 1
                        if exhausted * 2 > n_open:
                            # Drop the exhausted topics, keeping the rotation where it was.
                            n_open, cursor = compact_open_topics(open_topics, n_open, cursor, left_of)
                            exhausted = 0
                            if n_open == 0:
                                break
            while need > 0 and phase != 1:
                if n_open == 0 or not swap_for_extra(g, m, c, open_topics, n_open, left_of):
                    if phase == 2:
                        break  # another member at k may still take it
                    return False
                need -= 1
    for i in range(n_open):
        if left_of[open_topics[i]] > 0:
            return False
    return True


cdef void fallback_class_extras(Group* g, int c, int* candidate_mark) noexcept nogil:
    """Balanced by construction, sticky only where it ties: each topic's extras go to the class
    members with the fewest extras so far (its sticky candidates first among those), so the
    members' counts never differ by more than one."""
    cdef int i, j, m, t, x, want, level, lowest, stamp = 0
    cdef int k_top
    complete_lists(g)
    for j in range(g.class_offset[c], g.class_offset[c + 1]):
        m = g.class_members[j]
        g.member_extra_count[m] = 0
        g.member_list_count[m] = 0
    g.class_at_top[c] = 0
    for i in range(g.class_topic_offset[c], g.class_topic_offset[c + 1]):
        t = g.class_topics[i]
        want = g.topic_class_extras[g.class_topic_slot[i]]
        if want == 0:
            continue
        stamp += 1
        for x in range(g.candidate_offset[t], g.candidate_offset[t + 1]):
            candidate_mark[g.candidates[x]] = stamp
        lowest = -1
        for j in range(g.class_offset[c], g.class_offset[c + 1]):
            m = g.class_members[j]
            if lowest < 0 or g.member_extra_count[m] < lowest:
                lowest = g.member_extra_count[m]
        # Two levels at most (lowest, lowest + 1); candidates first within each level.
        for level in range(lowest, lowest + 2):
            for k_top in range(2):
                for j in range(g.class_offset[c], g.class_offset[c + 1]):
                    if want == 0:
                        break
                    m = g.class_members[j]
                    if g.member_extra_count[m] != level or has_extra(g, m, t):
                        continue
                    if (candidate_mark[m] == stamp) != (k_top == 0):
                        continue
                    give_extra(g, m, t)
                    want -= 1


cdef long fallbacks = 0  # classes whose extras needed the fallback (for tests; racy, rough)


def fallback_count():
    """How many times `uniform` used its fallback placement in this process (for tests)."""
    return fallbacks


cdef bint place_extras(Group* g) noexcept nogil:
    """Who gets each topic's extras (see the module docstring). False if out of memory."""
    global fallbacks
    cdef int t, c, i, slots = g.topic_class_offset[g.n_topics]
    cdef int nodes = g.n_topics + g.n_members + 1, stamp = 0
    cdef int* left = <int*>malloc((slots if slots > 0 else 1) * sizeof(int))
    cdef int* open_topics = <int*>malloc((g.n_topics if g.n_topics > 0 else 1) * sizeof(int))
    cdef int* left_of = <int*>calloc(g.n_topics if g.n_topics > 0 else 1, sizeof(int))
    cdef int* candidate_mark = <int*>calloc(g.n_members, sizeof(int))
    cdef int* seen = <int*>calloc(nodes, sizeof(int))
    cdef int* parent = <int*>malloc(nodes * sizeof(int))
    cdef int* queue = <int*>malloc(nodes * sizeof(int))
    cdef int* path = <int*>malloc(nodes * sizeof(int))
    cdef int64_t* order = <int64_t*>malloc((g.n_members if g.n_members > 0 else 1) * sizeof(int64_t))
    cdef int* waiting = <int*>malloc((g.candidate_offset[g.n_topics] + 1) * sizeof(int))
    cdef int* waiting_offset = <int*>calloc(g.n_topics + 1, sizeof(int))
    cdef bint ok = (left != NULL and open_topics != NULL and left_of != NULL
                    and candidate_mark != NULL and seen != NULL and parent != NULL
                    and queue != NULL and path != NULL and order != NULL and waiting != NULL
                    and waiting_offset != NULL)
    if ok:
        for i in range(slots):
            left[i] = g.topic_class_extras[i]
        keep_sticky_extras(g, left, waiting, waiting_offset)
        for c in range(g.n_classes):
            for i in range(g.class_topic_offset[c], g.class_topic_offset[c + 1]):
                left_of[g.class_topics[i]] = left[g.class_topic_slot[i]]
            improve_sticky_extras(g, c, left_of, seen, &stamp, parent, queue, path)
            if not fill_class_extras(g, c, open_topics, left_of, order):
                fallbacks += 1
                fallback_class_extras(g, c, candidate_mark)
            for i in range(g.class_topic_offset[c], g.class_topic_offset[c + 1]):
                g.topic_stamp[g.class_topics[i]] = 0
    free(left); free(open_topics); free(left_of); free(candidate_mark)
    free(seen); free(parent); free(queue); free(path); free(order); free(waiting); free(waiting_offset)
    return ok


cdef void move_partitions(Group* g, int* listed_offset, int* listed_members) noexcept nogil:
    """The new owner of every partition: each subscriber's target is quota (+1 with an extra); it
    keeps its previous partitions up to that (lowest first); the rest, and the unowned ones, go
    in partition order to the members still below their targets. A topic's extras: the members'
    lists bucketed by topic (`listed_*`: n_topics + 1, and room for every extra), plus, unless
    the lists are complete, its candidates flagged by the sticky pass."""
    cdef int t, p, o, i, j, c, m, q, n_free, next_free, target
    cdef int64_t base
    cdef bint flagged = not g.lists_complete
    cdef int* kept = g.member_scratch
    cdef int* extra_stamp = g.member_stamp
    cdef int* free_partitions = g.partition_list
    for m in range(g.n_members):
        for i in range(g.member_extra_offset[m], g.member_extra_offset[m] + g.member_list_count[m]):
            listed_offset[g.member_extra_topics[i] + 1] += 1
    for t in range(g.n_topics):
        listed_offset[t + 1] += listed_offset[t]
        g.topic_stamp[t] = 0
    for m in range(g.n_members):
        for i in range(g.member_extra_offset[m], g.member_extra_offset[m] + g.member_list_count[m]):
            t = g.member_extra_topics[i]
            listed_members[listed_offset[t] + g.topic_stamp[t]] = m
            g.topic_stamp[t] += 1

    for t in range(g.n_topics):
        q = g.quota[t]
        base = g.topic_offset[t]
        for i in range(listed_offset[t], listed_offset[t + 1]):
            extra_stamp[listed_members[i]] = t + 1
        if flagged:
            for i in range(g.candidate_offset[t], g.candidate_offset[t + 1]):
                if g.candidate_used[i]:
                    extra_stamp[g.candidates[i]] = t + 1
        n_free = 0
        for p in range(g.topic_partitions[t]):
            o = g.previous_owner[base + p]
            if o >= 0 and kept[o] < q + (extra_stamp[o] == t + 1):
                kept[o] += 1
                g.owner[base + p] = o
            else:
                free_partitions[n_free] = p
                n_free += 1
        next_free = 0
        if q > 0:  # every subscriber gets partitions: walk them all (fewer than partitions)
            for i in range(g.topic_class_offset[t], g.topic_class_offset[t + 1]):
                c = g.topic_classes[i]
                for j in range(g.class_offset[c], g.class_offset[c + 1]):
                    m = g.class_members[j]
                    target = q + (extra_stamp[m] == t + 1)
                    while kept[m] < target:
                        g.owner[base + free_partitions[next_free]] = m
                        next_free += 1
                        kept[m] += 1
                    kept[m] = 0
        else:  # only the members with an extra get one (a flagged one kept its partition)
            for i in range(listed_offset[t], listed_offset[t + 1]):
                m = listed_members[i]
                if kept[m] == 0:
                    g.owner[base + free_partitions[next_free]] = m
                    next_free += 1
                kept[m] = 0
            if flagged:
                for i in range(g.candidate_offset[t], g.candidate_offset[t + 1]):
                    if g.candidate_used[i]:
                        kept[g.candidates[i]] = 0
        # (Every member that kept a partition of t was walked above, so kept[] is zero again:
        # with a quota all subscribers are; without, only members with an extra keep one.)


# ---------------------------------------------------------------------------------------------
# The result (with the GIL).

cdef TargetAssignment build_result(Group* g, _Reader r, int** owner):
    """The TargetAssignment of `owner` (which it takes over: *owner becomes NULL)."""
    cdef TargetAssignment target = TargetAssignment.__new__(TargetAssignment)
    target.member_ids = r.member_ids
    target.topics = r.topics
    target.n_members = g.n_members
    target.n_topics = g.n_topics
    target.owner = owner[0]
    owner[0] = NULL
    target.topic_partitions = <int*>alloc(g.n_topics, sizeof(int))
    target.topic_offset = <int64_t*>alloc(g.n_topics + 1, sizeof(int64_t))
    memcpy(target.topic_partitions, g.topic_partitions, g.n_topics * sizeof(int))
    memcpy(target.topic_offset, g.topic_offset, (g.n_topics + 1) * sizeof(int64_t))
    return target


def uniform(members, bint homogeneous, partition_counts):
    """Kafka's `uniform` goals with per-topic balance; see the module docstring."""
    cdef Group g
    cdef int64_t* load = NULL
    cdef int* given = NULL
    cdef int* heap = NULL
    cdef int* listed_offset = NULL
    cdef int* listed_members = NULL
    cdef bint ok = True
    cdef int t, largest = 0
    memset(&g, 0, sizeof(Group))
    if len(members) == 0:
        return {}
    try:
        r = read_members(&g, members, homogeneous, partition_counts)
        read_previous_assignment(&g, r)
        g.quota = <int*>alloc(g.n_topics, sizeof(int))
        g.topic_extras = <int*>alloc(g.n_topics, sizeof(int))
        g.owner = <int*>alloc(g.n_partitions, sizeof(int))
        g.candidate_offset = <int*>alloc(g.n_topics + 1, sizeof(int))
        # At most one candidate (and at most one extra) per partition.
        g.candidates = <int*>alloc(g.n_partitions, sizeof(int))
        g.candidate_used = <char*>alloc(g.n_partitions, sizeof(char))
        g.member_candidates = <int*>alloc(g.n_members, sizeof(int))
        g.member_scratch = <int*>alloc(g.n_members, sizeof(int))
        g.member_stamp = <int*>alloc(g.n_members, sizeof(int))
        g.member_list = <int*>alloc(g.n_members, sizeof(int))
        g.member_extra_offset = <int*>alloc(g.n_members + 1, sizeof(int))
        g.member_extra_count = <int*>alloc(g.n_members, sizeof(int))
        g.member_list_count = <int*>alloc(g.n_members, sizeof(int))
        g.class_base_extras = <int*>alloc(g.n_classes, sizeof(int))
        g.class_top_slots = <int*>alloc(g.n_classes, sizeof(int))
        g.class_at_top = <int*>alloc(g.n_classes, sizeof(int))
        load = <int64_t*>alloc(g.n_classes, sizeof(int64_t))
        given = <int*>alloc(g.n_classes, sizeof(int))
        heap = <int*>alloc(g.n_classes, sizeof(int))
        for t in range(g.n_topics):
            if g.topic_partitions[t] > largest:
                largest = g.topic_partitions[t]
        g.partition_list = <int*>alloc(largest, sizeof(int))
        with nogil:
            compute_quotas_and_candidates(&g)
            share_extras_between_classes(&g, load, given, heap)
            plan_class_sizes(&g)
        g.member_extra_topics = <int*>alloc(g.member_extra_offset[g.n_members], sizeof(int))
        listed_offset = <int*>alloc(g.n_topics + 1, sizeof(int))
        listed_members = <int*>alloc(g.member_extra_offset[g.n_members], sizeof(int))
        with nogil:
            ok = place_extras(&g)
            if ok:
                move_partitions(&g, listed_offset, listed_members)
        if not ok:
            raise MemoryError()
        return build_result(&g, r, &g.owner)
    finally:
        release(load)
        release(given)
        release(heap)
        release(listed_offset)
        release(listed_members)
        free_group(&g)


# ---------------------------------------------------------------------------------------------
# range: Kafka's RangeAssignor.

cdef struct SortKey:
    int member
    int is_dynamic           # static members (with an instance id) first
    const char* text         # instance id or member id, UTF-8
    Py_ssize_t length


cdef int compare_keys(const void* a, const void* b) noexcept nogil:
    cdef const SortKey* x = <const SortKey*>a
    cdef const SortKey* y = <const SortKey*>b
    cdef Py_ssize_t n
    cdef int order
    if x.is_dynamic != y.is_dynamic:
        return x.is_dynamic - y.is_dynamic
    n = x.length if x.length < y.length else y.length
    order = memcmp(x.text, y.text, n)
    if order != 0:
        return order
    if x.length != y.length:
        return -1 if x.length < y.length else 1
    return x.member - y.member  # equal ids: keep input order, as Java's stable sort does


cdef list kafka_member_order(list member_ids, list specs):
    """Member indices as Kafka's RangeAssignor.sortMemberIds orders them. Java compares strings
    by UTF-16 code units, which is the order of their UTF-8 bytes except where a character above
    U+FFFF meets one in U+E000..U+FFFF; such ids are sorted by their UTF-16 encoding instead."""
    cdef Py_ssize_t n = len(member_ids), i, length
    cdef SortKey* keys
    cdef const char* text
    cdef bint astral = False
    keys = <SortKey*>alloc(n, sizeof(SortKey))
    texts = []  # keeps the strings (and so their UTF-8 buffers) alive
    try:
        for i in range(n):
            instance_id = specs[i].instance_id
            key_text = member_ids[i] if instance_id is None else instance_id
            texts.append(key_text)
            text = PyUnicode_AsUTF8AndSize(key_text, &length)
            keys[i].member = <int>i
            keys[i].is_dynamic = instance_id is None
            keys[i].text = text
            keys[i].length = length
            if not astral and not key_text.isascii() and max(key_text) > '\uffff':
                astral = True
        if astral:
            return sorted(range(n), key=lambda i: (specs[i].instance_id is None,
                                                    texts[i].encode('utf-16-be')))
        with nogil:
            qsort(keys, n, sizeof(SortKey), compare_keys)
        return [keys[i].member for i in range(n)]
    finally:
        release(keys)


cdef void range_assign(Group* g, const int* rank, int* sorted_members, int* head,
                       int* owner) noexcept nogil:
    """Kafka's RangeAssignor, topic by topic: the topic's subscribers in Kafka's order, the j-th
    taking [j * quota + min(j, extra), ... + quota (+1 while j < extra)). Only the members that
    get partitions are visited (with more subscribers than partitions, the first `extra`)."""
    cdef int c, i, j, m, t, n, q, extra, subscribers, getting, start, count, lo, hi, best
    cdef int64_t base
    # Each class's members in Kafka's order: a topic's subscribers are its classes' lists merged.
    for i in range(g.n_classes):
        head[i] = 0
    for i in range(g.n_members):
        m = sorted_members[i]  # sorted_members holds Kafka's order here; rebuilt per class below
        c = g.member_class[m]
        g.member_list[g.class_offset[c] + head[c]] = m
        head[c] += 1
    for t in range(g.n_topics):
        n = g.topic_partitions[t]
        subscribers = g.topic_subscribers[t]
        q = n // subscribers
        extra = n % subscribers
        getting = subscribers if q > 0 else extra
        base = g.topic_offset[t]
        lo, hi = g.topic_class_offset[t], g.topic_class_offset[t + 1]
        for i in range(lo, hi):
            head[g.topic_classes[i]] = g.class_offset[g.topic_classes[i]]
        for j in range(getting):
            if hi - lo == 1:
                c = g.topic_classes[lo]
            else:  # the class whose next member comes first in Kafka's order
                c = -1
                for i in range(lo, hi):
                    best = g.topic_classes[i]
                    if head[best] < g.class_offset[best + 1] and (
                            c < 0 or rank[g.member_list[head[best]]] < rank[g.member_list[head[c]]]):
                        c = best
            m = g.member_list[head[c]]
            head[c] += 1
            start = j * q + (j if j < extra else extra)
            count = q + (1 if j < extra else 0)
            for i in range(start, start + count):
                owner[base + i] = m


def range_(members, bint homogeneous, partition_counts):
    """Kafka's RangeAssignor: co-partitioned contiguous ranges, static members first."""
    cdef Group g
    cdef int i
    cdef int* sorted_members = NULL
    cdef int* rank = NULL
    cdef int* head = NULL
    cdef int* owner = NULL
    memset(&g, 0, sizeof(Group))
    if len(members) == 0:
        return {}
    try:
        r = read_members(&g, members, homogeneous, partition_counts)
        order = kafka_member_order(r.member_ids, r.specs)
        owner = <int*>alloc(g.n_partitions, sizeof(int))
        sorted_members = <int*>alloc(g.n_members, sizeof(int))
        rank = <int*>alloc(g.n_members, sizeof(int))
        head = <int*>alloc(g.n_classes, sizeof(int))
        g.member_list = <int*>alloc(g.n_members, sizeof(int))
        for i in range(g.n_members):
            sorted_members[i] = order[i]
            rank[sorted_members[i]] = i
        with nogil:
            range_assign(&g, rank, sorted_members, head, owner)
        return build_result(&g, r, &owner)
    finally:
        release(sorted_members)
        release(rank)
        release(head)
        release(owner)
        free_group(&g)
