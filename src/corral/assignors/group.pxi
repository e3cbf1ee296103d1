# Part of _assign.pyx (textually included there): The group flattened into C arrays, and reading
# it from Python objects.

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
    char* topic_settled          # per topic: see collect_candidates
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
    release(g.topic_settled)
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


cdef struct TopicKey:
    # A bytes topic id's first 16 bytes as two big-endian words (zero-padded), for a cheap sort.
    uint64_t high
    uint64_t low
    const char* data
    Py_ssize_t length
    int index


cdef int compare_topic_keys(const void* a, const void* b) noexcept nogil:
    """The order of the bytes themselves (as Python compares them)."""
    cdef const TopicKey* x = <const TopicKey*>a
    cdef const TopicKey* y = <const TopicKey*>b
    cdef Py_ssize_t n
    cdef int order
    if x.high != y.high:
        return -1 if x.high < y.high else 1
    if x.low != y.low:
        return -1 if x.low < y.low else 1
    n = x.length if x.length < y.length else y.length
    if n > 16:
        order = memcmp(x.data + 16, y.data + 16, n - 16)
        if order != 0:
            return order
    return (x.length > y.length) - (x.length < y.length)


cdef list canonical_topic_order(list topics):
    """The positions of `topics` in sorted order. bytes ids (corral's) in C; anything else with
    Python's order, or by type name and repr where values do not compare."""
    cdef Py_ssize_t n = len(topics), i, j, length
    cdef TopicKey* keys
    cdef const char* data
    cdef uint64_t word
    for i in range(n):
        if type(topics[i]) is not bytes:
            try:
                return sorted(range(n), key=topics.__getitem__)
            except TypeError:
                return sorted(range(n), key=lambda i: (type(topics[i]).__qualname__, repr(topics[i])))
    keys = <TopicKey*>alloc(n, sizeof(TopicKey))
    try:
        for i in range(n):
            PyBytes_AsStringAndSize(topics[i], <char**>&data, &length)
            keys[i].data, keys[i].length, keys[i].index = data, length, <int>i
            word = 0
            for j in range(16):
                word = (word << 8) | (<unsigned char>data[j] if j < length else 0)
                if j == 7:
                    keys[i].high, word = word, 0
            keys[i].low = word
        qsort(keys, n, sizeof(TopicKey), compare_topic_keys)
        return [keys[i].index for i in range(n)]
    finally:
        release(keys)


cdef object previous_topic_order(list specs, subscription):
    """The topic order of the previous TargetAssignment when it had exactly these topics (the
    usual incremental case: no sort), else None. Its order is canonical_topic_order's."""
    cdef TargetAssignment target
    cdef int m
    for m in range(min(len(specs), 8)):  # the first members usually carry one
        assignment = specs[m].assignment
        if type(assignment) is MemberAssignment:
            target = (<MemberAssignment>assignment).target
            if target.n_topics != len(subscription):
                return None
            for topic in target.topics:
                if topic not in subscription:
                    return None
            return target.topics
    return None


cdef int read_partition_counts(Group* g, list topics, partition_counts) except -1:
    """Each topic's partition count into the group; LookupError for a topic without one (or a
    negative one)."""
    cdef PyObject* found
    cdef bint exact = type(partition_counts) is dict
    cdef long n
    cdef int t
    g.topic_partitions = <int*>alloc(len(topics), sizeof(int))
    g.topic_offset = <int64_t*>alloc(len(topics) + 1, sizeof(int64_t))
    for t in range(len(topics)):
        topic = topics[t]
        if exact:
            found = PyDict_GetItemWithError(partition_counts, topic)
            n = -1 if found == NULL else PyLong_AsLong(found)
        else:
            count = partition_counts.get(topic)
            n = -1 if count is None else count
        if n < 0:
            raise LookupError(topic)
        g.topic_partitions[t] = <int>n
        g.topic_offset[t + 1] = g.topic_offset[t] + n
    g.n_partitions = g.topic_offset[len(topics)]
    return 0


cdef _Reader read_members(Group* g, members, bint homogeneous, partition_counts):
    cdef _Reader r = _Reader()
    cdef int m, c, t, n, i, total, slot
    cdef int64_t bits
    cdef dict class_by_identity, class_by_value
    cdef object last_subscription = None
    cdef int last_class = -1
    if type(members) is dict:  # (copied as lists at once, not through iterators)
        r.member_ids = PyDict_Keys(members)
        r.specs = PyDict_Values(members)
    else:
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

    # Topics in canonical (sorted) order, and each class's topics ascending: ties are broken by
    # topic order, which must not follow set iteration order (str/bytes hashes are seeded per
    # process, so the same group would get another assignment in another process). Kafka fails
    # the assignment when a member subscribes to a topic the metadata does not know
    # (PartitionAssignorException).
    renumber = None
    if g.n_classes == 1:
        r.topics = previous_topic_order(r.specs, r.class_subscriptions[0])
        if r.topics is None:
            r.topics = list(r.class_subscriptions[0])
            r.topics = [r.topics[i] for i in canonical_topic_order(r.topics)]
        class_topic_lists = [range(len(r.topics))]
    else:
        # Numbered as found, then renumbered in sorted order (one dict lookup per topic of
        # each class: with a class per member, that is most of the reading).
        r.topic_by_value_ = {}
        found_topics = []
        class_topic_lists = []
        for subscription in r.class_subscriptions:
            indices = []
            for topic in subscription:
                found = r.topic_by_value_.get(topic)
                if found is None:
                    found = len(found_topics)
                    r.topic_by_value_[topic] = found
                    found_topics.append(topic)
                indices.append(found)
            class_topic_lists.append(indices)
        order = canonical_topic_order(found_topics)
        r.topics = [found_topics[i] for i in order]
        renumber = _IntArray(max(len(order), 1))
        for t in range(len(order)):
            (<_IntArray>renumber).data[<int>order[t]] = t
            r.topic_by_value_[r.topics[t]] = t
    g.n_topics = len(r.topics)
    read_partition_counts(g, r.topics, partition_counts)

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
            if g.n_classes == 1:
                t = i  # every topic, in order
            else:
                t = (<_IntArray>renumber).data[<int>indices[i]]
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
    if g.n_classes > 1:
        # Each class's topics ascending (they were read in a set's order): listed again topic
        # by topic, a counting sort.
        memset(g.class_scratch, 0, g.n_classes * sizeof(int))
        for t in range(g.n_topics):
            for slot in range(g.topic_class_offset[t], g.topic_class_offset[t + 1]):
                c = g.topic_classes[slot]
                i = g.class_topic_offset[c] + g.class_scratch[c]
                g.class_topics[i] = t
                g.class_topic_slot[i] = slot
                g.class_scratch[c] += 1
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
