"""Share groups' settings (KIP-932): the broker's `group.share.*` and `share.coordinator.*`
(broker_settings.py) and each share group's `share.*` (group_settings.py)."""
