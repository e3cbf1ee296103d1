# Part of _assign.pyx (textually included there): The result type: TargetAssignment and
# MemberAssignment.

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
    object per member or partition until someone reads it; given back as the members' previous
    assignments, it is read from the arrays."""
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
        """{topic id -> partitions} as a plain dict (the same one on every call: do not change
        it)."""
        return self.as_dict()


from collections.abc import Mapping as _Mapping
_Mapping.register(MemberAssignment)
_Mapping.register(TargetAssignment)


