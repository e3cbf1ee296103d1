# Part of _assign.pyx (textually included there): uniform: the extras of each class, moving
# partitions, and the entry point.

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
    class_top_slots members reach k + 1; what no member can take directly goes along cheapest
    augmenting paths (uniform_paths.pxi). False only if that fails (not expected)."""
    cdef int i, j, m, t, n, need, n_open = 0, cursor = 0, scanned, exhausted = 0
    cdef int64_t work, needing, remaining
    cdef bint ok, mixed, check_flags
    cdef PathSearch search
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
    # topics: left for last, it could find the extras left all of one topic). Usually a few
    # members need any (the rest keep theirs, in class order after them), or all need as many.
    n = g.class_offset[c + 1] - g.class_offset[c]
    needing = 0
    mixed = False
    for j in range(n):
        need = k - g.member_extra_count[g.class_members[g.class_offset[c] + j]]
        if need > 0:
            order[needing] = <int64_t>(-need) * (<int64_t>1 << 32) + j  # need descending, then j
            mixed = mixed or (order[needing] >> 32) != (order[0] >> 32)
            needing += 1
    if mixed:
        qsort(order, needing, sizeof(int64_t), compare_int64)
    if needing < n:
        i = <int>needing
        for j in range(n):
            if g.member_extra_count[g.class_members[g.class_offset[c] + j]] >= k:
                order[i] = j
                i += 1
    # Phase 0: members below k; 1: k + 1 for class_top_slots members. Directly only: a member
    # takes an extra of a topic it lacks, rotating over the open topics.
    check_flags = not g.lists_complete and g.candidate_offset[g.n_topics] > 0
    for phase in range(2):
        if phase == 1 and g.class_at_top[c] >= g.class_top_slots[c]:
            break  # no k + 1 slot left
        for j in range(needing if phase == 0 else n):  # (phase 0: the members needing some)
            m = g.class_members[g.class_offset[c] + <int>(order[j] & <int64_t>0xFFFFFFFF)]
            if phase == 0:
                need = k - g.member_extra_count[m]
            else:
                need = 1 if (g.member_extra_count[m] == k and g.class_at_top[c] < g.class_top_slots[c]) else 0
            if need <= 0 or n_open == 0:
                continue
            for i in range(g.member_extra_offset[m], g.member_extra_offset[m] + g.member_list_count[m]):
                mark[g.member_extra_topics[i]] = m + 1
            scanned = 0
            while need > 0 and scanned < n_open:
                t = open_topics[cursor]
                cursor = cursor + 1 if cursor + 1 < n_open else 0
                scanned += 1
                if left_of[t] > 0 and mark[t] != m + 1 and not (
                        check_flags and holds_sticky_extra(g, m, t)):
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
    # What is left (members holding one of every open topic): cheapest augmenting paths.
    remaining = 0
    for i in range(n_open):
        remaining += left_of[open_topics[i]]
    if remaining == 0:
        return True
    memset(&search, 0, sizeof(PathSearch))
    ok = start_path_search(g, &search, c)
    while ok and remaining > 0:
        ok = augment_cheapest(g, &search, left_of) >= 0
        remaining -= 1
    free_path_search(&search)
    return ok


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
    cdef bint flagged = not g.lists_complete, settled
    cdef int* kept = g.member_scratch
    cdef int* extra_stamp = g.member_stamp
    cdef int* free_partitions = g.partition_list
    cdef const int* candidates = g.candidates
    cdef const char* used = g.candidate_used
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
        if g.topic_settled[t]:
            # Every partition owned, no owner over quota + 1: if every candidate has an extra,
            # each owner's target is what it holds, and nothing of the topic moves.
            settled = True
            for i in range(g.candidate_offset[t], g.candidate_offset[t + 1]):
                if not ((flagged and used[i]) or extra_stamp[candidates[i]] == t + 1):
                    settled = False
                    break
            if settled:
                memcpy(g.owner + base, g.previous_owner + base, g.topic_partitions[t] * sizeof(int))
                continue
        if flagged:
            for i in range(g.candidate_offset[t], g.candidate_offset[t + 1]):
                if used[i]:
                    extra_stamp[candidates[i]] = t + 1
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
        g.quota = <int*>alloc(g.n_topics, sizeof(int))
        g.topic_extras = <int*>alloc(g.n_topics, sizeof(int))
        g.topic_settled = <char*>alloc(g.n_topics, sizeof(char))
        g.owner = <int*>alloc_uninit(g.n_partitions, sizeof(int))  # move_partitions sets all
        g.candidate_offset = <int*>alloc(g.n_topics + 1, sizeof(int))
        # At most one candidate (and at most one extra) per partition.
        g.candidates = <int*>alloc_uninit(g.n_partitions, sizeof(int))
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
        g.partition_list = <int*>alloc_uninit(largest, sizeof(int))
        compute_quotas(&g)
        read_previous_assignment(&g, r, True)  # and the candidates
        with nogil:
            share_extras_between_classes(&g, load, given, heap)
            ok = balance_classes(&g)
            plan_class_sizes(&g)
        if not ok:
            raise MemoryError()
        g.member_extra_topics = <int*>alloc_uninit(g.member_extra_offset[g.n_members], sizeof(int))
        listed_offset = <int*>alloc(g.n_topics + 1, sizeof(int))
        listed_members = <int*>alloc_uninit(g.member_extra_offset[g.n_members], sizeof(int))
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


