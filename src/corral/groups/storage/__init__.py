"""The groups layer's storage: records and their bytes (`records`), the write path (`writer`),
snapshots (`snapshot`) and where a group's records live (`placement`). Applying records to memory
is the coordinator's `replay` (coordinator.py), used live and at load alike."""
