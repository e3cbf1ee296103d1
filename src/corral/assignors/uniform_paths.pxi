# Part of _assign.pyx (textually included there): uniform: the extras no member can take
# directly, along cheapest augmenting paths.

# ---------------------------------------------------------------------------------------------
# Who gets a class's extras is a min-cost flow: source -> topic (its extras for the class) ->
# member (one per topic; cost -1 where the member is the topic's sticky candidate, so the extra
# keeps a partition in place) -> sink (k per member, and class_top_slots members one more).
# keep_sticky_extras and improve_sticky_extras build a maximum flow over the candidate edges
# alone, which is a min-cost flow of its value (every unit there costs -1, the least a unit can);
# fill_class_extras then adds units along paths of cost 0 (a member with room takes an extra of
# a topic it lacks). Adding each further unit along a cheapest path keeps the flow min-cost
# (successive shortest paths), so the class ends up moving the fewest partitions its balance
# allows. Only when no member with room can take an extra directly does a unit need the general
# search below: a cheapest path through members that hand one extra on and take another (the
# "swap" of a member holding one of every open topic is the shortest such path).

cdef bint is_candidate(Group* g, int m, int t) noexcept nogil:
    """Whether member m held more than topic t's quota (its extra of t keeps a partition)."""
    cdef int i
    for i in range(g.candidate_offset[t], g.candidate_offset[t + 1]):
        if g.candidates[i] == m:
            return True
    return False


cdef enum:
    FAR = 1 << 30       # no path found (yet)


cdef struct PathSearch:
    int c                      # the class
    int nodes                  # topic t is node t, member m is n_topics + m, the k + 1 slots
                               # the last
    int* dist
    int* parent
    int* queue                 # circular, nodes + 1
    char* queued
    int* holder_start          # per topic: where its holders (of this class) are listed
    int* holder_count
    int* holders
    char* entry_sticky         # parallel to member_extra_topics: the member is that topic's
                               # candidate
    int* holder_mark           # per member: stamps (a fresh stamp each time: holders change)
    int* candidate_mark        # per member: t + 1 for topic t's candidates (which never change)
    int stamp
    int* sinks                 # the members with room (k + 1 too while a slot is left)
    int* sink_holders          # per topic: how many of them hold its extra


cdef void free_path_search(PathSearch* s) noexcept nogil:
    free(s.dist); free(s.parent); free(s.queue); free(s.queued); free(s.holder_start)
    free(s.holder_count); free(s.holders); free(s.entry_sticky); free(s.holder_mark)
    free(s.candidate_mark); free(s.sinks); free(s.sink_holders)
    memset(s, 0, sizeof(PathSearch))


cdef bint start_path_search(Group* g, PathSearch* s, int c) noexcept nogil:
    """The search's state for class c: each topic's holders, each listed extra's stickiness.
    False if out of memory."""
    cdef int i, j, m, t, x, total = 0
    cdef int* position  # parallel to holders, while they are read: the entry in the member's list
    complete_lists(g)
    s.c = c
    s.nodes = g.n_topics + g.n_members + 1
    s.dist = <int*>malloc(s.nodes * sizeof(int))
    s.parent = <int*>malloc(s.nodes * sizeof(int))
    s.queue = <int*>malloc((s.nodes + 1) * sizeof(int))
    s.queued = <char*>calloc(s.nodes, 1)
    s.holder_start = <int*>calloc(g.n_topics + 1, sizeof(int))
    s.holder_count = <int*>calloc(g.n_topics + 1, sizeof(int))
    s.entry_sticky = <char*>calloc(g.member_extra_offset[g.n_members] + 1, 1)
    s.holder_mark = <int*>calloc(g.n_members, sizeof(int))
    s.candidate_mark = <int*>calloc(g.n_members, sizeof(int))
    s.sinks = <int*>malloc((g.n_members + 1) * sizeof(int))
    s.sink_holders = <int*>calloc(g.n_topics + 1, sizeof(int))
    for i in range(g.class_topic_offset[c], g.class_topic_offset[c + 1]):
        t = g.class_topics[i]
        s.holder_start[t] = total
        # Its extras, and room for one more: a path taken back to front lists a topic's new
        # holder before the old one gives it up.
        total += g.topic_class_extras[g.class_topic_slot[i]] + 1
    s.holders = <int*>malloc((total + 1) * sizeof(int))
    position = <int*>malloc((total + 1) * sizeof(int))
    if (s.dist == NULL or s.parent == NULL or s.queue == NULL or s.queued == NULL
            or s.holder_start == NULL or s.holder_count == NULL or s.holders == NULL
            or s.entry_sticky == NULL or s.holder_mark == NULL or s.candidate_mark == NULL
            or s.sinks == NULL or s.sink_holders == NULL or position == NULL):
        free(position)
        return False
    for j in range(g.class_offset[c], g.class_offset[c + 1]):
        m = g.class_members[j]
        for i in range(g.member_extra_offset[m], g.member_extra_offset[m] + g.member_list_count[m]):
            t = g.member_extra_topics[i]
            x = s.holder_start[t] + s.holder_count[t]
            s.holders[x] = m
            position[x] = i
            s.holder_count[t] += 1
    for i in range(g.class_topic_offset[c], g.class_topic_offset[c + 1]):
        t = g.class_topics[i]
        for x in range(g.candidate_offset[t], g.candidate_offset[t + 1]):
            s.candidate_mark[g.candidates[x]] = t + 1
        for x in range(s.holder_start[t], s.holder_start[t] + s.holder_count[t]):
            s.entry_sticky[position[x]] = s.candidate_mark[s.holders[x]] == t + 1
    free(position)
    return True


cdef void path_take(Group* g, PathSearch* s, int m, int t) noexcept nogil:
    """Member m takes topic t's extra (its list keeps room for k + 1)."""
    s.entry_sticky[g.member_extra_offset[m] + g.member_list_count[m]] = is_candidate(g, m, t)
    give_extra(g, m, t)
    s.holders[s.holder_start[t] + s.holder_count[t]] = m
    s.holder_count[t] += 1
    set_candidate_used(g, t, m, 1)


cdef void path_give_up(Group* g, PathSearch* s, int m, int t) noexcept nogil:
    """Member m gives topic t's extra up (take_extra moves its last entry into the gap)."""
    cdef int i, first = g.member_extra_offset[m], last = first + g.member_list_count[m] - 1
    for i in range(first, last + 1):
        if g.member_extra_topics[i] == t:
            s.entry_sticky[i] = s.entry_sticky[last]
            break
    take_extra(g, m, t)
    first = s.holder_start[t]
    last = first + s.holder_count[t] - 1
    for i in range(first, last + 1):
        if s.holders[i] == m:
            s.holders[i] = s.holders[last]
            break
    s.holder_count[t] -= 1
    set_candidate_used(g, t, m, 0)


cdef inline void reach(PathSearch* s, int v, int d, int u, int* tail) noexcept nogil:
    if d < s.dist[v]:
        s.dist[v] = d
        s.parent[v] = u
        if not s.queued[v]:
            s.queued[v] = 1
            s.queue[tail[0]] = v
            tail[0] = tail[0] + 1 if tail[0] < s.nodes else 0


cdef int augment_cheapest(Group* g, PathSearch* s, int* left_of) noexcept nogil:
    """One more of the class's extras, along a cheapest path (Bellman-Ford with a queue) from a
    topic with extras left to a member with room: it takes the extra, or hands one of its own on
    to a member that takes that, and so on; members at k + 1 may step down for another to step
    up. Returns the path's cost (how many partitions it moves beyond the ones it must), or -1
    when there is none (not expected: the class's extras always fit)."""
    cdef int T = g.n_topics, TOP = g.n_topics + g.n_members, c = s.c
    cdef int k = g.class_base_extras[c], top_slots = g.class_top_slots[c]
    cdef int i, j, m, t, u, v, d, x, head = 0, tail = 0, best = -1, best_cost = FAR, n_sinks = 0
    cdef int64_t pops = 0, budget = <int64_t>64 * s.nodes + 4096
    for v in range(s.nodes):
        s.dist[v] = FAR
        s.queued[v] = 0
    # The members with room, and per topic how many of them hold its extra: a topic reached at
    # cost 0 that one of them lacks ends the search at once (the usual path: a member takes an
    # open topic's extra and hands on one of its own), before all members are expanded.
    s.stamp += 1
    for j in range(g.class_offset[c], g.class_offset[c + 1]):
        m = g.class_members[j]
        if g.member_extra_count[m] < k or (g.member_extra_count[m] == k and g.class_at_top[c] < top_slots):
            s.sinks[n_sinks] = m
            n_sinks += 1
            s.holder_mark[m] = s.stamp
    for i in range(g.class_topic_offset[c], g.class_topic_offset[c + 1]):
        t = g.class_topics[i]
        s.sink_holders[t] = 0
        for j in range(s.holder_start[t], s.holder_start[t] + s.holder_count[t]):
            s.sink_holders[t] += s.holder_mark[s.holders[j]] == s.stamp
    for i in range(g.class_topic_offset[c], g.class_topic_offset[c + 1]):
        t = g.class_topics[i]
        if left_of[t] > 0:
            s.parent[t] = -1
            reach(s, t, 0, -1, &tail)
    # Every path costs at least 0 here (the flow so far is min-cost), so one of cost 0 ends it.
    while head != tail and best_cost > 0:
        u = s.queue[head]
        head = head + 1 if head < s.nodes else 0
        s.queued[u] = 0
        d = s.dist[u]
        pops += 1
        if pops > budget:
            return -1  # (a negative cycle would loop: impossible for a min-cost flow)
        if u < T:  # topic u's extra: to a member of the class without one of u
            s.stamp += 1
            for i in range(s.holder_start[u], s.holder_start[u] + s.holder_count[u]):
                s.holder_mark[s.holders[i]] = s.stamp
            for i in range(g.candidate_offset[u], g.candidate_offset[u + 1]):
                s.candidate_mark[g.candidates[i]] = u + 1
            for j in range(g.class_offset[c], g.class_offset[c + 1]):
                m = g.class_members[j]
                if s.holder_mark[m] == s.stamp:
                    continue
                v = T + m
                reach(s, v, d - (s.candidate_mark[m] == u + 1), u, &tail)
                if s.dist[v] < best_cost and s.parent[v] == u and g.member_extra_count[m] < k:
                    best, best_cost = v, s.dist[v]
        elif u < TOP:  # member u - T took one more: it steps up to k + 1, or hands one on
            m = u - T
            if g.member_extra_count[m] == k:
                reach(s, TOP, d, u, &tail)
                if s.dist[TOP] < best_cost and g.class_at_top[c] < top_slots:
                    best, best_cost = TOP, s.dist[TOP]
            for i in range(g.member_extra_offset[m], g.member_extra_offset[m] + g.member_list_count[m]):
                t = g.member_extra_topics[i]
                reach(s, t, d + s.entry_sticky[i], u, &tail)
                if s.parent[t] == u and s.dist[t] <= 0 and s.sink_holders[t] < n_sinks:
                    x = sink_lacking(g, s, t, n_sinks)
                    s.dist[T + x], s.parent[T + x] = s.dist[t], t
                    best, best_cost = T + x, s.dist[t]
                    if g.member_extra_count[x] == k:  # it steps up to k + 1
                        s.dist[TOP], s.parent[TOP] = s.dist[t], T + x
                        best = TOP
                    break
        else:  # the k + 1 slots: a member there steps down, handing one of its extras on
            for j in range(g.class_offset[c], g.class_offset[c + 1]):
                m = g.class_members[j]
                if g.member_extra_count[m] == k + 1:
                    reach(s, T + m, d, u, &tail)
    if best < 0:
        return -1
    apply_path(g, s, best, left_of)
    return best_cost


cdef int sink_lacking(Group* g, PathSearch* s, int t, int n_sinks) noexcept nogil:
    """A member with room that lacks topic t's extra (there is one: sink_holders[t] < n_sinks)."""
    cdef int i
    s.stamp += 1
    for i in range(s.holder_start[t], s.holder_start[t] + s.holder_count[t]):
        s.holder_mark[s.holders[i]] = s.stamp
    for i in range(n_sinks):
        if s.holder_mark[s.sinks[i]] != s.stamp:
            return s.sinks[i]
    return s.sinks[0]  # (not reached)


cdef void apply_path(Group* g, PathSearch* s, int end, int* left_of) noexcept nogil:
    """The path to `end`, applied from its end back to its source: a member on the way gives
    its extra up before it takes the next one, so no list ever holds more than k + 1."""
    cdef int T = g.n_topics, TOP = g.n_topics + g.n_members
    cdef int u, v = end
    u = s.parent[v]
    while u >= 0:
        if u < T and v < TOP:  # member v took topic u's extra
            path_take(g, s, v - T, u)
        elif T <= u < TOP and v < T:  # member u gave topic v's extra up
            path_give_up(g, s, u - T, v)
        v = u
        u = s.parent[v]
    left_of[v] -= 1
