# Part of _assign.pyx (textually included there): Reading the members' previous assignments.

# ---------------------------------------------------------------------------------------------
# The previous assignment (with the GIL, except the pass over a previous target's owners).

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
    if target.topics is r.topics:  # (previous_topic_order lent it)
        for i in range(target.n_topics):
            mapping[i] = i
        maps[id(target)] = holder
        return mapping
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
            old_id = target.member_ids[previous.index]
            if (previous.target is not target or old_to_new[previous.index] != -1
                    or (old_id is not r.member_ids[m] and old_id != r.member_ids[m])):
                return None
            old_to_new[previous.index] = m
        elif assignment:
            return None
    return target


cdef void read_topic_owners(Group* g, int t, const int* old_owner, int n,
                            const int* old_to_new) noexcept nogil:
    """Topic t's previous owners from a previous target's (its first n partitions; the rest
    are new), then its candidates (hold, collect_candidates). The loop is spelled out with local
    pointers: it runs once per partition of the group."""
    cdef int* previous = g.previous_owner + g.topic_offset[t]
    cdef int* stamp = g.member_stamp
    cdef int* listed = g.candidates + g.candidate_offset[t]
    cdef int* counted = g.member_candidates
    cdef int p, o, m, mark = -(t + 1), touched = 0, unowned = g.topic_partitions[t] - n
    cdef int64_t row
    cdef bint repeated = False
    if g.n_classes == 1 and g.quota[t] == 0:  # the usual case in big groups, kept tight
        for p in range(n):
            o = old_owner[p]
            m = old_to_new[o] if o >= 0 else -1
            previous[p] = m
            if m < 0:
                unowned += 1
            elif stamp[m] == mark:  # (hold's quota-0 case, inline)
                repeated = True
            else:
                stamp[m] = mark
                listed[touched] = m
                counted[m] += 1
                touched += 1
    else:
        for p in range(n):
            o = old_owner[p]
            m = old_to_new[o] if o >= 0 else -1
            if m >= 0 and g.n_classes > 1:  # a member that no longer subscribes to t drops it
                row = <int64_t>g.member_class[m] * g.n_topics + t
                if not (g.subscribes[row >> 3] >> (row & 7)) & 1:
                    m = -1
            previous[p] = m
            if m < 0:
                unowned += 1
            else:
                hold(g, t, m, &touched, &repeated)
    for p in range(n, g.topic_partitions[t]):
        previous[p] = -1
    collect_candidates(g, t, touched, unowned, repeated)


cdef int read_previous_assignment(Group* g, _Reader r, bint with_candidates) except -1:
    """previous_owner from each member's `assignment`. Partitions of topics the member no longer
    subscribes to, out of range, or already owned by an earlier member are dropped. A previous
    TargetAssignment is read from its arrays: all at once when it is the whole group's (one
    pass over its partitions), else member by member; any other mapping through Python.
    `with_candidates` (uniform): also collect_candidates, in the same pass when the previous
    target has the group's topics in the group's order (the usual case)."""
    cdef IdentityMap topics_by_identity
    cdef int m, t, old_t, i, j, p, o, n
    cdef int64_t base, old_base
    cdef Py_ssize_t k, size
    cdef MemberAssignment previous
    cdef TargetAssignment target
    cdef int* mapping
    cdef int* old_to_new = NULL
    cdef dict topic_maps = {}
    cdef bint same_topics
    g.previous_owner = <int*>alloc_uninit(g.n_partitions, sizeof(int))
    identity_map_init(&topics_by_identity, g.n_topics)
    try:
        first = None
        for m in range(g.n_members):
            if type(r.specs[m].assignment) is MemberAssignment:
                first = r.specs[m].assignment
                break
        if first is not None:
            old_to_new = <int*>alloc_uninit((<MemberAssignment>first).target.n_members, sizeof(int))
            target = whole_previous_target(g, r, old_to_new)
            if target is not None:
                mapping = topic_map_of(target, &topics_by_identity, r, topic_maps)
                same_topics = target.n_topics == g.n_topics
                for t in range(g.n_topics if same_topics else 0):
                    same_topics = same_topics and mapping[t] == t
                if same_topics and with_candidates and (g.n_classes == 1 or g.subscribes != NULL):
                    # One pass: owners, and each topic's candidates right after its partitions.
                    with nogil:
                        for t in range(g.n_topics):
                            read_topic_owners(g, t, target.owner + target.topic_offset[t],
                                              min(g.topic_partitions[t], target.topic_partitions[t]),
                                              old_to_new)
                    return 0
                for i in range(g.n_partitions):
                    g.previous_owner[i] = -1
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
                if with_candidates:
                    with nogil:
                        compute_candidates(g)
                return 0
        for i in range(g.n_partitions):
            g.previous_owner[i] = -1
        for m in range(g.n_members):
            assignment = r.specs[m].assignment
            if type(assignment) is not MemberAssignment and not assignment:
                continue  # (a new member)
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
        if with_candidates:
            with nogil:
                compute_candidates(g)
    finally:
        identity_map_free(&topics_by_identity)
        release(old_to_new)
    return 0


