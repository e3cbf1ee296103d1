"""The share-group APIs on the wire: ShareGroupHeartbeat, ShareGroupDescribe and the share
offsets' admin APIs (their group logic is groups/share/)."""
