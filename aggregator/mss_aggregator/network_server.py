"""A fleet's LoRaWAN devices registered in ChirpStack v4 through its own gRPC API.

ChirpStack has no device file import: its users script its API.  :func:`register_chirpstack`
does it with the ``chirpstack-api`` package's clients (``DeviceServiceStub``): for each device
of :func:`mss_aggregator.provision.chirpstack_bodies` it asks ``Get``; a device it does not
have is created (``Create``, then ``CreateKeys``: ChirpStack wants the LoRaWAN 1.0.x AppKey in
``nwk_key``); one it has is compared field by field and left alone when equal, updated
(``Update``, ``UpdateKeys``) when not, never created twice.  A device of another application
is refused (ChirpStack's ``Update`` does not move a device between applications).  The server
is the record of what is done, so re-running a provisioning that stopped half-way (a server
gone, a key refused) completes it: what was created is found and skipped.

Devices go in batches of concurrent calls (one channel, several threads); after each batch
the progress callback is called once a device.  The API key travels as ChirpStack reads it,
the ``authorization: Bearer <key>`` metadata of every call.
"""
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from urllib.parse import urlsplit

BATCH = 20  # devices in flight at once: ChirpStack serves each call with a database round trip or two
TIMEOUT_S = 30.0  # per call
OUTCOMES = ("created", "updated", "unchanged")


class RegisterError(ValueError):
    """A registration that stopped: ``report`` holds what was done before it did."""

    def __init__(self, message, report=None):
        super().__init__(message)
        self.report = report


@dataclass
class Report:
    """What a registration did: the DevEUIs created, updated and left unchanged, in order."""
    created: list = field(default_factory=list)
    updated: list = field(default_factory=list)
    unchanged: list = field(default_factory=list)

    @property
    def done(self):
        return len(self.created) + len(self.updated) + len(self.unchanged)

    def summary(self):
        return ", ".join(f"{len(getattr(self, what))} {what}" for what in OUTCOMES)


def endpoint(url):
    """(``host:port``, TLS or not) of ChirpStack's API at ``url``: ``http://host:port`` (plain,
    ChirpStack's default listener is :8080) or ``https://host[:port]`` (TLS, :443)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/") \
            or parts.query or parts.username:
        raise RegisterError(f"{url!r}: not an http:// or https:// URL of the API (scheme, host and port only)")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 8080)
    except ValueError:
        raise RegisterError(f"{url!r}: the port is not a number from 1 to 65535") from None
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{host}:{port}", parts.scheme == "https"


def channel(url):
    """A gRPC channel to :func:`endpoint` ``url`` (TLS against the system's CAs)."""
    import grpc

    target, tls = endpoint(url)
    return grpc.secure_channel(target, grpc.ssl_channel_credentials()) if tls else grpc.insecure_channel(target)


def device_message(body):
    """The ``api.Device`` of a :func:`~mss_aggregator.provision.chirpstack_bodies` entry."""
    from chirpstack_api import api

    d = body["device"]
    return api.Device(dev_eui=d["devEui"], name=d["name"], description=d["description"], join_eui=d["joinEui"],
                      application_id=d["applicationId"], device_profile_id=d["deviceProfileId"], tags=d["tags"])


def keys_message(body):
    from chirpstack_api import api

    return api.DeviceKeys(dev_eui=body["device"]["devEui"], nwk_key=body["deviceKeys"]["nwkKey"])


def merged(have, want):
    """``have`` (the server's device) with ``want``'s fields set: its other tags, its variables,
    its disabled and frame-counter flags kept (an operator's edits survive a re-run)."""
    from chirpstack_api import api

    new = api.Device()
    new.CopyFrom(have)
    for name in ("name", "description", "join_eui", "device_profile_id"):
        setattr(new, name, getattr(want, name))
    new.tags.update(want.tags)
    return new


def register_one(stub, body, metadata):
    """Create, update or leave one device (and its keys); its outcome, one of :data:`OUTCOMES`."""
    import grpc
    from chirpstack_api import api

    want, keys = device_message(body), keys_message(body)
    call = {"metadata": metadata, "timeout": TIMEOUT_S}
    try:
        have = stub.Get(api.GetDeviceRequest(dev_eui=want.dev_eui), **call).device
    except grpc.RpcError as exc:
        if exc.code() != grpc.StatusCode.NOT_FOUND:
            raise
        have = None
    outcome = "unchanged"
    if have is None:
        stub.Create(api.CreateDeviceRequest(device=want), **call)
        outcome = "created"
    elif have.application_id != want.application_id:
        raise RegisterError(f"device {want.dev_eui} is in application {have.application_id}, not "
                            f"{want.application_id}: delete it there first (ChirpStack does not move a device)")
    elif merged(have, want) != have:
        stub.Update(api.UpdateDeviceRequest(device=merged(have, want)), **call)
        outcome = "updated"
    try:
        old = None if have is None else stub.GetKeys(api.GetDeviceKeysRequest(dev_eui=want.dev_eui), **call).device_keys
    except grpc.RpcError as exc:
        if exc.code() != grpc.StatusCode.NOT_FOUND:
            raise
        old = None
    if old is None:
        stub.CreateKeys(api.CreateDeviceKeysRequest(device_keys=keys), **call)
        return "updated" if outcome == "unchanged" else outcome  # a device left without keys: now it has them
    if old.nwk_key.lower() != keys.nwk_key.lower():
        stub.UpdateKeys(api.UpdateDeviceKeysRequest(device_keys=keys), **call)
        return "updated"
    return outcome


def failure(exc, dev_eui):
    """One line for a call that failed on ``dev_eui``."""
    import grpc

    if isinstance(exc, RegisterError):
        return str(exc)
    if isinstance(exc, grpc.RpcError):
        code = exc.code()
        hint = {grpc.StatusCode.UNAUTHENTICATED: " (the API key is not valid)",
                grpc.StatusCode.PERMISSION_DENIED: " (the API key may not write this application's devices)",
                grpc.StatusCode.UNAVAILABLE: " (the server cannot be reached)"}.get(code, "")
        return f"device {dev_eui}: {code.name}: {exc.details()}{hint}"
    return f"device {dev_eui}: {exc!r}"


def register_chirpstack(bodies, url, api_key, batch=BATCH, on_device=None):
    """Register ``bodies`` (:func:`~mss_aggregator.provision.chirpstack_bodies`, each with its
    ``applicationId`` and ``deviceProfileId``) in the ChirpStack v4 API at ``url``.

    Returns a :class:`Report`; ``on_device()`` is called once a device as each batch ends.
    Raises RegisterError at the end of the first batch with a failure (``report`` holds the
    devices done until then, failed batch included): re-running completes the rest.
    """
    from chirpstack_api import api

    missing = [b["device"]["devEui"] for b in bodies
               if not (b["device"].get("applicationId") and b["device"].get("deviceProfileId"))]
    if missing:
        raise RegisterError(f"{len(missing)} device(s) without an application id or device-profile id "
                            f"({missing[0]} first): ChirpStack refuses a device without them")
    metadata = (("authorization", f"Bearer {api_key}"),)
    report = Report()
    with channel(url) as chan, ThreadPoolExecutor(max_workers=max(1, batch)) as pool:
        stub = api.DeviceServiceStub(chan)
        for start in range(0, len(bodies), max(1, batch)):
            part = bodies[start:start + max(1, batch)]
            futures = [pool.submit(register_one, stub, body, metadata) for body in part]
            errors = []
            for body, future in zip(part, futures):
                eui = body["device"]["devEui"]
                try:
                    getattr(report, future.result()).append(eui)
                except Exception as exc:  # noqa: BLE001 -- each device's failure is reported, the batch finishes
                    errors.append(failure(exc, eui))
                    continue
                if on_device:
                    on_device()
            if errors:
                more = f" (and {len(errors) - 1} more in that batch)" if len(errors) > 1 else ""
                raise RegisterError(f"{errors[0]}{more}; {report.done} of {len(bodies)} devices registered "
                                    f"({report.summary()}): run it again to complete it", report)
    return report
