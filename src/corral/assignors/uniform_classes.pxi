# Part of _assign.pyx (textually included there): uniform: how a topic's extras are split
# between the classes subscribed to it.

# ---------------------------------------------------------------------------------------------
# Where members with different subscriptions share a topic, each class gets part of its extras
# (topic_class_extras), and with them its members' totals. Balance first: the totals should be
# as even as per-topic balance allows (a greedy split, then balance_classes); stickiness only
# decides between splits that balance as well.

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


cdef struct ClassLevels:
    int* size            # members per class
    int64_t* base        # partitions per member from the quotas
    int64_t* extras      # the class's share of extras (Z)
    int* slot_sticky     # per (topic, class) slot: the class's candidates for the topic
    int64_t* order       # classes by highest total, descending
    int* class_seen      # BFS stamps and parents
    int* class_parent    # the topic a class was reached through
    int* class_origin    # the class its search started from
    int* topic_seen
    int* topic_parent    # the slot (topic, class) a topic was reached from
    int* queue


cdef inline int64_t lowest_total(ClassLevels* v, int c) noexcept nogil:
    return v.base[c] + v.extras[c] // v.size[c]


cdef inline int64_t highest_total(ClassLevels* v, int c) noexcept nogil:
    return v.base[c] + (v.extras[c] + v.size[c] - 1) // v.size[c]


cdef int find_balancing_path(Group* g, ClassLevels* v, int stamp) noexcept nogil:
    """A class reachable from a class whose highest total is 2 or more above its lowest total,
    where each step hands one of a topic's extras from a class to another subscribed class with
    room for it; -1 if there is none. Searches start from the classes with the highest totals,
    and each class and topic is visited once, so a call costs O(slots)."""
    cdef int j, i, c, d, t, slot, other, pass_, head, tail, source
    cdef int64_t top
    for j in range(g.n_classes):
        source = <int>(v.order[j] & <int64_t>0xFFFFFFFF)
        if v.class_seen[source] == stamp:
            continue
        top = highest_total(v, source)
        v.class_seen[source] = stamp
        v.class_parent[source] = -1
        v.class_origin[source] = source
        head, tail = 0, 1
        v.queue[0] = source
        while head < tail:
            c = v.queue[head]
            head += 1
            # Topics whose extras the class holds beyond its candidates first: handing those
            # on keeps as many partitions in place.
            for pass_ in range(2):
                for i in range(g.class_topic_offset[c], g.class_topic_offset[c + 1]):
                    t = g.class_topics[i]
                    slot = g.class_topic_slot[i]
                    if (v.topic_seen[t] == stamp or g.topic_class_extras[slot] == 0
                            or (pass_ == 0) != (g.topic_class_extras[slot] > v.slot_sticky[slot])):
                        continue
                    v.topic_seen[t] = stamp
                    v.topic_parent[t] = slot
                    for other in range(g.topic_class_offset[t], g.topic_class_offset[t + 1]):
                        d = g.topic_classes[other]
                        if v.class_seen[d] == stamp or g.topic_class_extras[other] >= v.size[d]:
                            continue
                        v.class_seen[d] = stamp
                        v.class_parent[d] = t
                        v.class_origin[d] = source
                        if lowest_total(v, d) + 2 <= top:
                            return d
                        v.queue[tail] = d
                        tail += 1
    return -1


cdef void hand_on_along_path(Group* g, ClassLevels* v, int d) noexcept nogil:
    """One extra from the path's first class to its last (d), topic by topic along the path."""
    cdef int t, slot
    while v.class_parent[d] >= 0:
        t = v.class_parent[d]
        slot = g.topic_class_offset[t]
        while g.topic_classes[slot] != d:
            slot += 1
        g.topic_class_extras[slot] += 1           # d takes one of t's extras
        g.topic_class_extras[v.topic_parent[t]] -= 1  # from the class before it
        d = g.topic_classes[v.topic_parent[t]]


cdef bint balance_classes(Group* g) noexcept nogil:
    """After the greedy split: while a class's members could hand an extra on, through classes
    sharing topics, to members with 2 or more partitions fewer, do so. Each step lowers the sum
    of squared totals, and when no step is left the totals are as even as per-topic balance
    allows (the highest as low, the lowest as high as possible: it is the standard optimality
    condition of a separable convex cost over these flows). Only classes sharing topics take
    part; a homogeneous group has nothing to do. False if out of memory."""
    cdef ClassLevels v
    cdef int c, i, t, x, d, origin, steps, stamp = 0, C = g.n_classes, slots = g.topic_class_offset[g.n_topics]
    cdef bint shared = False
    cdef int* slot_of_class = g.class_scratch
    for t in range(g.n_topics):
        shared = shared or g.topic_class_offset[t + 1] - g.topic_class_offset[t] > 1
    if not shared:
        return True
    memset(&v, 0, sizeof(ClassLevels))
    v.size = <int*>malloc(C * sizeof(int))
    v.base = <int64_t*>calloc(C, sizeof(int64_t))
    v.extras = <int64_t*>calloc(C, sizeof(int64_t))
    v.slot_sticky = <int*>calloc(slots + 1, sizeof(int))
    v.order = <int64_t*>malloc(C * sizeof(int64_t))
    v.class_seen = <int*>calloc(C, sizeof(int))
    v.class_parent = <int*>malloc(C * sizeof(int))
    v.class_origin = <int*>malloc(C * sizeof(int))
    v.topic_seen = <int*>calloc(g.n_topics, sizeof(int))
    v.topic_parent = <int*>malloc(g.n_topics * sizeof(int))
    v.queue = <int*>malloc(C * sizeof(int))
    cdef bint ok = (v.size != NULL and v.base != NULL and v.extras != NULL and v.slot_sticky != NULL
                    and v.order != NULL and v.class_seen != NULL and v.class_parent != NULL
                    and v.class_origin != NULL and v.topic_seen != NULL and v.topic_parent != NULL
                    and v.queue != NULL)
    if ok:
        for c in range(C):
            v.size[c] = g.class_offset[c + 1] - g.class_offset[c]
            for i in range(g.class_topic_offset[c], g.class_topic_offset[c + 1]):
                v.base[c] += g.quota[g.class_topics[i]]
                v.extras[c] += g.topic_class_extras[g.class_topic_slot[i]]
        for t in range(g.n_topics):
            for i in range(g.topic_class_offset[t], g.topic_class_offset[t + 1]):
                slot_of_class[g.topic_classes[i]] = i
            for x in range(g.candidate_offset[t], g.candidate_offset[t + 1]):
                v.slot_sticky[slot_of_class[g.member_class[g.candidates[x]]]] += 1
        # Bounded work (each step costs O(classes + slots)): past it, the split stays as
        # reached, per-topic balanced still. Not reached in the tests or the benchmark shapes.
        for steps in range(max(1024, 64000000 // (C + slots))):
            for c in range(C):  # highest total descending, then class order
                v.order[c] = -highest_total(&v, c) * (<int64_t>1 << 32) + c
            qsort(v.order, C, sizeof(int64_t), compare_int64)
            stamp += 1
            d = find_balancing_path(g, &v, stamp)
            if d < 0:
                break
            origin = v.class_origin[d]
            hand_on_along_path(g, &v, d)
            v.extras[origin] -= 1
            v.extras[d] += 1
    free(v.size); free(v.base); free(v.extras); free(v.slot_sticky); free(v.order)
    free(v.class_seen); free(v.class_parent); free(v.class_origin); free(v.topic_seen)
    free(v.topic_parent); free(v.queue)
    return ok
