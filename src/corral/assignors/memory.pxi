# Part of _assign.pyx (textually included there): Small helpers: checked allocation from a pool,
# an identity map from topic ids to indices.

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
    return alloc_block(count, size, True)


cdef void* alloc_uninit(size_t count, size_t size) except NULL:
    """alloc() without zeroing a reused block, for arrays written in full before being read."""
    return alloc_block(count, size, False)


cdef void* alloc_block(size_t count, size_t size, bint zeroed) except NULL:
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
            if zeroed:
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


