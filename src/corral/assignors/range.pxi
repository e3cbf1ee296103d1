# Part of _assign.pyx (textually included there): range: Kafka's RangeAssignor.

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
