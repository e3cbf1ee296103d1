# Part of _assign.pyx (textually included there): uniform, step by step (no GIL): quotas,
# candidates and who gets the extras within a class.

# ---------------------------------------------------------------------------------------------
# uniform, step by step (no GIL).

cdef void compute_quotas(Group* g) noexcept nogil:
    """Quota and extras per topic."""
    cdef int t
    for t in range(g.n_topics):
        g.quota[t] = g.topic_partitions[t] // g.topic_subscribers[t]
        g.topic_extras[t] = g.topic_partitions[t] % g.topic_subscribers[t]


cdef inline void hold(Group* g, int t, int m, int* touched, bint* repeated) noexcept nogil:
    """Member m held one more partition of topic t (read in topic order). With a quota of 0
    (fewer partitions than subscribers, as in big groups) every owner is a candidate, listed at
    once (and marked -(t + 1) in member_stamp, which move_partitions later marks t + 1); else
    owners are counted in member_scratch and listed in member_list for collect_candidates."""
    if g.quota[t] == 0:
        if g.member_stamp[m] == -(t + 1):
            repeated[0] = True
        else:
            g.member_stamp[m] = -(t + 1)
            g.candidates[g.candidate_offset[t] + touched[0]] = m
            g.member_candidates[m] += 1
            touched[0] += 1
        return
    if g.member_scratch[m] == 0:
        g.member_list[touched[0]] = m
        touched[0] += 1
    g.member_scratch[m] += 1


cdef void collect_candidates(Group* g, int t, int touched, int unowned, bint repeated) noexcept nogil:
    """Topic t's sticky candidates, from the partitions hold() saw: the members that held more
    than its quota (each keeps quota + 1 if it gets one of the topic's extras); the counts are
    zero again after. Also whether the topic is `settled`: every partition owned, none by a
    member over quota + 1 (then if every candidate gets an extra, nothing of it moves)."""
    cdef int i, o, most = 0, n_candidates = g.candidate_offset[t]
    if g.quota[t] == 0:  # listed already
        g.candidate_offset[t + 1] = n_candidates + touched
        g.topic_settled[t] = unowned == 0 and not repeated
        return
    for i in range(touched):
        o = g.member_list[i]
        if g.member_scratch[o] > g.quota[t] and g.topic_extras[t] > 0:
            g.candidates[n_candidates] = o
            g.member_candidates[o] += 1
            n_candidates += 1
        if g.member_scratch[o] > most:
            most = g.member_scratch[o]
        g.member_scratch[o] = 0
    g.candidate_offset[t + 1] = n_candidates
    g.topic_settled[t] = unowned == 0 and most <= g.quota[t] + (g.topic_extras[t] > 0)


cdef void compute_candidates(Group* g) noexcept nogil:
    """collect_candidates for every topic, from previous_owner."""
    cdef int t, p, o, touched, unowned
    cdef bint repeated
    cdef int64_t base
    for t in range(g.n_topics):
        base = g.topic_offset[t]
        touched = unowned = 0
        repeated = False
        for p in range(g.topic_partitions[t]):
            o = g.previous_owner[base + p]
            if o >= 0:
                hold(g, t, o, &touched, &repeated)
            else:
                unowned += 1
        collect_candidates(g, t, touched, unowned, repeated)



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
        waiting_offset[t + 1] = waiting_offset[t]
        if g.n_classes == 1:  # (the usual case, without the lookups below)
            keep_sticky_extras_of_topic(g, t, left, waiting, waiting_offset)
            rounds = max(rounds, waiting_offset[t + 1] - waiting_offset[t])
            continue
        for i in range(g.topic_class_offset[t], g.topic_class_offset[t + 1]):
            slot_of_class[g.topic_classes[i]] = i
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


cdef inline void keep_sticky_extras_of_topic(Group* g, int t, int* left, int* waiting,
                                             int* waiting_offset) noexcept nogil:
    """keep_sticky_extras' first pass for topic t of a group with one class (slot t)."""
    cdef int i, m, k = g.class_base_extras[0], remaining = left[t], n_waiting = waiting_offset[t + 1]
    cdef const int* candidates = g.candidates
    cdef int* count = g.member_extra_count
    cdef char* used = g.candidate_used
    for i in range(g.candidate_offset[t], g.candidate_offset[t + 1]):
        if remaining == 0:
            break
        m = candidates[i]
        if count[m] < k:  # (so it stays <= k: class_at_top is unchanged)
            count[m] += 1
            used[i] = 1
            remaining -= 1
        else:
            waiting[n_waiting] = i
            n_waiting += 1
    left[t] = remaining
    waiting_offset[t + 1] = n_waiting


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


