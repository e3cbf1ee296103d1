"""The group APIs on the wire, by concern: `classic` (JoinGroup, SyncGroup, Heartbeat, LeaveGroup),
`offsets` (OffsetCommit, OffsetFetch, OffsetDelete), `admin` (FindCoordinator, ListGroups,
DescribeGroups, DeleteGroups). Handlers only decode requests and shape answers; the coordinator
(`broker.groups`) decides."""
