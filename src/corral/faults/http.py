"""The faults admin endpoint: JSON over plain HTTP on `corral.faults.listen`, like /metrics.

    GET    /faults               {"faults": [...]}: active ones and the last ones done
    POST   /faults               a fault (model.py) -> 201 {"id": N, "fault": {...}}
    DELETE /faults/<id>          -> {"removed": N}
    DELETE /faults               -> {"removed": <how many>}
    POST   /faults/<id>/release  a hold's requests go on -> {"released": <how many>}

A fault on the broker the broker cannot act on (an unknown group or member, a bad target, the
group's coordinator not loaded: broker.py) is answered 404, 400 or 503 with
{"error", "kafka_error": Kafka's error name, "message"}.

Refused with 403 and a JSON reason unless `corral.faults.enable` is true. With an authorizer
(`authorizer.class.name`), a request must carry HTTP Basic credentials of a SCRAM user the broker
knows (401 otherwise) whose principal may ALTER the CLUSTER (403 otherwise). One request per
connection (HTTP/1.1 with `Connection: close`), a trio task in the broker's nursery.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import trio

from corral.faults.model import FaultError, FaultRefused
from corral.security.acls import CLUSTER_NAME, AclOperation, ResourceType

if TYPE_CHECKING:
    from corral.broker import Broker
    from corral.faults.inject import Injector

log = logging.getLogger("corral.faults")

MAX_HEAD = 8192
MAX_BODY = 1 << 16
TIMEOUT_S = 10.0
REASONS = {
    200: "OK",
    201: "Created",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    409: "Conflict",
    413: "Payload Too Large",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


@dataclass
class HttpRequest:
    method: str
    path: str
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    client: str = ""


@dataclass
class Reply:
    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


class BadRequest(Exception):
    def __init__(self, status: int, reason: str):
        super().__init__(reason)
        self.status = status


async def read_request(stream: trio.SocketStream) -> HttpRequest:
    data = b""
    while b"\r\n\r\n" not in data:
        if len(data) > MAX_HEAD:
            raise BadRequest(413, "request head too large")
        chunk = await stream.receive_some(4096)
        if not chunk:
            raise BadRequest(400, "incomplete request")
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3:
        raise BadRequest(400, "malformed request line")
    headers = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    try:
        length = int(headers.get("content-length", "0"))
    except ValueError:
        raise BadRequest(400, "malformed Content-Length") from None
    if length > MAX_BODY:
        raise BadRequest(413, f"body over {MAX_BODY} bytes")
    while len(body) < length:
        chunk = await stream.receive_some(length - len(body))
        if not chunk:
            raise BadRequest(400, "incomplete body")
        body += chunk
    return HttpRequest(parts[0], parts[1].split("?", 1)[0], headers, body[:length])


class FaultsApi:
    """Routes one HTTP request to the injector, after the checks."""

    def __init__(self, injector: Injector, broker: Broker, enabled: bool):
        self.injector = injector
        self.broker = broker
        self.enabled = enabled

    async def answer(self, request: HttpRequest) -> Reply:
        if not self.enabled:
            return Reply(
                403,
                {"error": "fault injection is disabled: set corral.faults.enable=true to use it"},
            )
        refusal = await self._refusal(request)
        if refusal is not None:
            return refusal
        return self._route(request)

    async def _refusal(self, request: HttpRequest) -> Reply | None:
        authorizer = self.broker.authorizer
        if authorizer is None:
            return None
        challenge = {"WWW-Authenticate": 'Basic realm="corral faults"'}
        user, password = _basic(request.headers.get("authorization", ""))
        if user is None or password is None:
            return Reply(401, {"error": "HTTP Basic credentials of a SASL user needed"}, challenge)
        if not await self.broker.credentials.check_password(user, password):
            log.info("faults API: authentication of %r from %s failed", user, request.client)
            return Reply(401, {"error": "authentication failed"}, challenge)
        principal = f"User:{user}"
        if not authorizer.authorize(
            principal, request.client, AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME
        ):
            log.info(
                "Principal = %s is Denied operation = ALTER from host = %s on resource = "
                "CLUSTER:%s for request = faults API",
                principal,
                request.client,
                CLUSTER_NAME,
            )
            return Reply(403, {"error": f"{principal} may not ALTER the cluster"})
        return None

    def _route(self, request: HttpRequest) -> Reply:
        parts = [p for p in request.path.split("/") if p]
        if not parts or parts[0] != "faults" or len(parts) > 3:
            return Reply(404, {"error": f"no such resource: {request.path}"})
        method = request.method
        faults = self.injector.faults
        if len(parts) == 1:
            if method == "GET":
                return Reply(200, {"faults": faults.listing()})
            if method == "POST":
                try:
                    spec = json.loads(request.body or b"null")
                except ValueError as e:
                    return Reply(400, {"error": f"not JSON: {e}"})
                try:
                    fault = faults.add(spec)
                except FaultRefused as e:
                    # A broker fault the broker could not act on: Kafka's error and why.
                    body = {"error": str(e), "kafka_error": e.kafka_error, "message": e.message}
                    return Reply(e.status, body)
                except FaultError as e:
                    return Reply(400, {"error": str(e)})
                return Reply(201, {"id": fault.id, "fault": fault.describe()})
            if method == "DELETE":
                return Reply(200, {"removed": faults.clear()})
            return Reply(405, {"error": f"{method} /faults: use GET, POST or DELETE"})
        try:
            fault_id = int(parts[1])
        except ValueError:
            return Reply(404, {"error": f"no such fault: {parts[1]}"})
        if len(parts) == 2:
            if method == "GET":
                faults.on_list()  # broker faults' counters up to date
                found = faults.get(fault_id)
                if found is None:
                    return Reply(404, {"error": f"no such fault: {fault_id}"})
                return Reply(200, found.describe())
            if method == "DELETE":
                if not faults.remove(fault_id):
                    return Reply(404, {"error": f"no such fault: {fault_id}"})
                return Reply(200, {"removed": fault_id})
            return Reply(405, {"error": f"{method} /faults/{fault_id}: use GET or DELETE"})
        if parts[2] != "release":
            return Reply(404, {"error": f"no such resource: {request.path}"})
        if method != "POST":
            return Reply(405, {"error": "use POST to release"})
        try:
            released = self.injector.release(fault_id)
        except KeyError:
            return Reply(404, {"error": f"no such fault: {fault_id}"})
        except FaultError as e:
            return Reply(409, {"error": str(e)})
        return Reply(200, {"released": released})


def _basic(header: str) -> tuple[str | None, str | None]:
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "basic" or not token:
        return None, None
    try:
        decoded = base64.b64decode(token.strip(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None, None
    user, sep, password = decoded.partition(":")
    return (user, password) if sep else (None, None)


def _encode(reply: Reply) -> bytes:
    body = json.dumps(reply.body).encode() + b"\n"
    headers = {
        "Content-Type": "application/json",
        "Content-Length": str(len(body)),
        "Connection": "close",
        **reply.headers,
    }
    head = f"HTTP/1.1 {reply.status} {REASONS.get(reply.status, '')}\r\n" + "".join(
        f"{k}: {v}\r\n" for k, v in headers.items()
    )
    return head.encode("latin-1") + b"\r\n" + body


async def serve(listeners: list[trio.SocketListener], api: FaultsApi) -> None:
    async def handle(stream: trio.SocketStream) -> None:
        try:
            reply = Reply(400, {"error": "request not received in time"})
            with trio.move_on_after(TIMEOUT_S):
                try:
                    request = await read_request(stream)
                    peer = stream.socket.getpeername()
                    request.client = peer[0] if isinstance(peer, tuple) else ""
                    reply = await api.answer(request)
                except BadRequest as e:
                    reply = Reply(e.status, {"error": str(e)})
                except Exception:
                    # A bug here must not take the broker down with it.
                    log.exception("faults API: internal error")
                    reply = Reply(500, {"error": "internal error (see the broker's log)"})
            await stream.send_all(_encode(reply))
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass
        finally:
            await stream.aclose()

    await trio.serve_listeners(handle, listeners)
