"""The links a collector reads, as small frozen specs checked once, here.

:class:`TlsFiles` (paho-mqtt takes TLS as one ``tls=`` argument: so do the collectors),
:class:`MqttEndpoint` (a broker URL, its TLS, client id and shared-subscription group) and
:class:`Links`, the combination a service collects from: an MQTT broker (the fleet's, or with a
LoRaWAN :class:`~.lorawan.Server` that network server's), serial ports, or a shuffler's batches
only.  Every combination that cannot work is refused in :meth:`Links.__post_init__`
with a :class:`LinkError` in the library's own terms; its ``problem`` is a stable name a command
line maps to its own flags."""
from dataclasses import dataclass, field

from mss_aggregator.collect.collectors import check_client_id, check_topic_level, parse_broker, parse_serial


class LinkError(ValueError):
    """A link spec, or a combination of them, that cannot work; ``problem`` names which (one of
    :data:`PROBLEMS`)."""

    def __init__(self, problem, message):
        super().__init__(message)
        self.problem = problem


PROBLEMS = {
    "no-link": "no link: give an MQTT broker and/or a serial port",
    "lorawan-without-broker": "a LoRaWAN link needs a broker, the network server's MQTT broker",
    "tls-key-without-cert": "a TLS key needs the client certificate it goes with",
    "tls-without-broker": "TLS files are for a broker connection, and no broker is given",
    "shared-without-broker": "a shared subscription is a broker's, and no broker is given",
    "shared-without-client-id": "a shared subscription needs a client id per worker (workers sharing one id "
                                "would disconnect each other)",
    "shuffled-device-link": "a shuffler's batches come from a broker only: a serial port or LoRaWAN link carries "
                            "device reports, whose reports name their device",
    "shuffled-without-broker": "a shuffler's batches need a broker, the one the shuffler publishes them to",
    "forward-without-broker": "no broker to forward the batches to: give one, or collect from a broker",
    "webhook-with-broker": "a network server's webhooks are its uplinks: no broker goes with them (its MQTT "
                           "integration is the other way to take them, not both)",
    "webhook-token": "a webhook token is one or more visible ASCII characters, without spaces (it travels in the "
                     "Authorization header)",
    "allowed-shuffled": "an allow-list of device ids is for device reports: a shuffler's batches name no device "
                        "(the shuffler takes the allow-list)",
}


def refuse(problem):
    raise LinkError(problem, PROBLEMS[problem])


@dataclass(frozen=True)
class TlsFiles:
    """A broker connection's TLS files; any of them means TLS (:meth:`wanted`).

    Parameters
    ----------
    ca : str, optional
        PEM file of the CA the broker's certificate must be signed by (default: the system's).
    cert : str, optional
        PEM file of a client certificate.
    key : str, optional
        PEM file of its key (default: in the certificate's file); refused without ``cert``.
    """

    ca: str | None = None
    cert: str | None = None
    key: str | None = None

    def __post_init__(self):
        if self.key and not self.cert:
            refuse("tls-key-without-cert")

    def wanted(self):
        return bool(self.ca or self.cert)


@dataclass(frozen=True)
class MqttEndpoint:
    """One broker.

    Parameters
    ----------
    url : str
        ``mqtt[s]://[user:pass@]host[:port]`` (checked here: ValueError).
    tls : TlsFiles
    client_id : str, optional
        The MQTT client id (None: the service chooses one and keeps it).
    share_group : str, optional
        An MQTT 5 shared-subscription group (a topic level; needs ``client_id``).
    """

    url: str
    tls: TlsFiles = TlsFiles()
    client_id: str | None = None
    share_group: str | None = None

    def __post_init__(self):
        parse_broker(self.url)
        if self.client_id is not None:
            check_client_id(self.client_id, "client id")
        if self.share_group is not None:
            check_topic_level(self.share_group, "share group")
            if self.client_id is None:
                refuse("shared-without-client-id")

    def address(self):
        """(host, port, user, password, tls): :func:`~.collectors.parse_broker`, TLS also when
        :attr:`tls` asks for it."""
        host, port, user, password, tls = parse_broker(self.url)
        return host, port, user, password, tls or self.tls.wanted()


@dataclass(frozen=True)
class Webhook:
    """A network server's uplinks POSTed to the aggregator's HTTP server (ChirpStack's HTTP
    integration, The Things Stack's webhooks: :mod:`.webhook`), each with ``Authorization: Bearer
    <token>``.

    Parameters
    ----------
    server : mss_aggregator.collect.lorawan.Server
        :func:`~.lorawan.webhook_server` of ``chirpstack`` or ``tts``.
    token : str
        The secret the network server sends (visible ASCII, no spaces: LinkError otherwise).
    """

    server: object
    token: str = field(repr=False)  # never in a log or a traceback

    def __post_init__(self):
        if not isinstance(self.token, str) or not self.token or not all("!" <= c <= "~" for c in self.token):
            refuse("webhook-token")

    webhook = True  # Links.lorawan's kind: POSTed, not read from a broker


@dataclass(frozen=True)
class Links:
    """What a service collects from.

    Parameters
    ----------
    mqtt : MqttEndpoint, optional
        The fleet's broker, or with ``lorawan`` the network server's.
    lorawan : mss_aggregator.collect.lorawan.Server or Webhook, optional
        A LoRaWAN network server whose uplinks are the reports: read from its MQTT integration
        (on ``mqtt``), or a :class:`Webhook`, POSTed to the aggregator's HTTP server (no broker).
    serial : tuple of str
        Serial ports, ``PORT[,BAUD]``.
    shuffled : bool
        A shuffler's batches, from ``mqtt`` only (the key that authenticates them is a secret,
        given to the service beside the links).
    allowed : mss_aggregator.collect.allow_list.AllowList, optional
        The only device ids whose reports are taken (:attr:`~.ingest.Ingest.allowed`: any other is
        quarantined as ``not_allowed``); None: every id.  Refused with ``shuffled`` (batches carry
        no device id: the shuffler checks it).

    Refused (:class:`LinkError`): a shuffler's batches with a device link or without a broker, no
    link, LoRaWAN's MQTT integration without a broker, webhooks with one.  :meth:`of` builds one
    from loose values, as a command line has them.
    """

    mqtt: MqttEndpoint | None = None
    lorawan: object = None
    serial: tuple = ()
    shuffled: bool = False
    allowed: object = None

    def __post_init__(self):
        object.__setattr__(self, "serial", tuple(self.serial))
        for spec in self.serial:
            parse_serial(spec, "serial port")
        self.check(self.mqtt is not None, self.lorawan, self.serial, self.shuffled)
        if self.shuffled and self.allowed is not None:
            refuse("allowed-shuffled")

    @staticmethod
    def check(broker, lorawan, serial, shuffled):
        """LinkError for a combination that cannot work, in the order a reader fixes them: the
        mode, a link at all, LoRaWAN's broker (``broker``: whether there is one; none with a
        :class:`Webhook`)."""
        if shuffled:
            if serial or lorawan:
                refuse("shuffled-device-link")
            if not broker:
                refuse("shuffled-without-broker")
        webhook = isinstance(lorawan, Webhook)
        if not broker and not serial and not webhook:
            refuse("no-link")
        if lorawan and not broker and not webhook:
            refuse("lorawan-without-broker")
        if webhook and broker:
            refuse("webhook-with-broker")

    @classmethod
    def of(cls, broker=None, tls=(), client_id=None, share_group=None, lorawan=None, serial=(), shuffled=False,
           allowed=None):
        """The links of a broker URL (or None) with its TLS files (``tls``: (ca, cert, key), each
        optional), client id and share group, a LoRaWAN server, serial ports, the shuffled mode and
        the allow-list (``allowed``); the combinations are checked first (:meth:`check`), then TLS,
        then the broker's own spec."""
        cls.check(broker is not None, lorawan, serial, shuffled)
        if shuffled and allowed is not None:
            refuse("allowed-shuffled")
        files = TlsFiles(*tls)
        if broker is None:
            if files.wanted():
                refuse("tls-without-broker")
            if share_group is not None:
                refuse("shared-without-broker")
            return cls(None, lorawan, serial, shuffled, allowed=allowed)
        return cls(MqttEndpoint(broker, files, client_id, share_group), lorawan, serial, shuffled, allowed=allowed)

    def off_lorawan(self):
        """Whether device reports come by a link other than a LoRaWAN network server (a serial
        port, the fleet's broker), whose arrival time dates nothing (SPEC.md section 4)."""
        return not self.shuffled and bool(self.serial or (self.mqtt and not self.lorawan))

    def network_server(self):
        """The :class:`~.lorawan.Server` whose uplinks are the reports (a webhook's too), or None."""
        return self.lorawan.server if isinstance(self.lorawan, Webhook) else self.lorawan

    def webhook(self):
        """The :class:`Webhook` the reports are POSTed by, or None."""
        return self.lorawan if isinstance(self.lorawan, Webhook) else None
