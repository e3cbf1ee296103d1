"""The engine named by a `--cluster` URL."""

from __future__ import annotations

from corral.cluster.engine import Engine


def connect(url: str) -> Engine:
    """postgresql://... or postgres://... (PostgreSQL), etcd://HOST:PORT[,HOST:PORT...] (etcd)."""
    scheme = url.partition("://")[0].lower()
    if scheme in ("postgresql", "postgres"):
        try:
            from corral.cluster.postgres import PostgresEngine
        except ImportError:
            raise ValueError(
                "cluster mode on PostgreSQL needs psycopg: pip install 'corral[cluster]'"
            ) from None

        return PostgresEngine(url)
    if scheme == "etcd":
        from corral.cluster.etcd import EtcdEngine

        return EtcdEngine(url)
    raise ValueError(
        f"corral.cluster.url {url!r}: the engine is etcd://HOST:PORT or postgresql://..."
    )
