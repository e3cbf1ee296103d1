"""Share-group consumers (KIP-932) of `corral load --group-type share`: the member and its
heartbeats (member.py), its share sessions with partition leaders (session.py), the records they
consume (producer.py) and what the parent prepares before forking (setup.py)."""
